//! CPU use, measured the way `top` does: CPU time (user + system, in
//! clock ticks) read from /proc twice, divided by the wall time between.
//!
//! - the switch's threads: `/proc/self/task/TID/stat` per thread, grouped
//!   by thread name (`worker*` are the data-path workers, which also build
//!   the ICMP errors the switch sends; everything else is the control
//!   plane: punt/inject, learner, FPM, API, event manager, ...). `lanyard`
//!   is the whole process from `/proc/self/stat`, which also keeps the
//!   time of threads that have ended (event runs).
//!   Percent of one core, so two busy threads read 200.
//! - the host: `/proc/stat`'s first line, busy = everything but idle and
//!   iowait, percent of all cores (100 = every core busy).

use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Instant;

/// The groups a `cpu:` event can watch, besides `thread NAME`.
pub const GROUPS: [&str; 4] = ["lanyard", "workers", "control-plane", "host"];

/// Threads whose name starts with this are data-path workers.
const WORKER_PREFIX: &str = "worker";

/// utime + stime (fields 14 and 15 of proc_pid_stat(5)) and the name.
fn parse_stat(s: &str) -> Option<(String, u64)> {
    let open = s.find('(')?;
    let (name, rest) = s[open + 1..].rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, index 11.
    let t = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((name.to_string(), t))
}

/// Busy and total jiffies of all cores from /proc/stat's `cpu` line.
fn parse_host(s: &str) -> Option<(u64, u64)> {
    let l = s.lines().next()?;
    if !l.starts_with("cpu ") {
        return None;
    }
    let v: Vec<u64> = l
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest time is
    // already inside user).
    let total: u64 = v.iter().take(8).sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// One thread's share in the last interval.
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadCpu {
    pub tid: u32,
    pub name: String,
    pub pct: u64,
}

/// Samples CPU use; each call to [`Cpu::sample`] measures the interval
/// since the previous one.
pub struct Cpu {
    tck: f64,
    proc_prev: Option<(u64, Instant)>,
    threads_prev: HashMap<u32, (String, u64)>,
    threads_at: Option<Instant>,
    host_prev: Option<(u64, u64)>,
    /// Results of the last interval.
    pub lanyard: Option<u64>,
    pub host: Option<u64>,
    pub threads: Vec<ThreadCpu>,
    /// Cores the host has (for people: host 50 % of 2 cores).
    pub cores: usize,
}

impl Default for Cpu {
    fn default() -> Self {
        // SAFETY: sysconf has no preconditions.
        let tck = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        Cpu {
            tck: if tck > 0 { tck as f64 } else { 100.0 },
            proc_prev: None,
            threads_prev: HashMap::new(),
            threads_at: None,
            host_prev: None,
            lanyard: None,
            host: None,
            threads: Vec::new(),
            cores: std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1),
        }
    }
}

fn pct(ticks: u64, tck: f64, secs: f64) -> u64 {
    if secs <= 0.0 {
        return 0;
    }
    (ticks as f64 / tck / secs * 100.0).round() as u64
}

impl Cpu {
    pub fn sample(&mut self) {
        let now = Instant::now();
        if let Some((_, t)) = std::fs::read_to_string("/proc/self/stat")
            .ok()
            .and_then(|s| parse_stat(&s))
        {
            if let Some((p, at)) = self.proc_prev {
                self.lanyard = Some(pct(
                    t.saturating_sub(p),
                    self.tck,
                    now.duration_since(at).as_secs_f64(),
                ));
            }
            self.proc_prev = Some((t, now));
        }
        let mut cur = HashMap::new();
        if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
            for e in rd.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                // A thread may end between the listing and the read.
                if let Some(st) = std::fs::read_to_string(e.path().join("stat"))
                    .ok()
                    .and_then(|s| parse_stat(&s))
                {
                    cur.insert(tid, st);
                }
            }
        }
        if let Some(at) = self.threads_at {
            let secs = now.duration_since(at).as_secs_f64();
            let mut v: Vec<ThreadCpu> = cur
                .iter()
                .map(|(tid, (name, t))| {
                    // A thread new in this interval counts from 0.
                    let before = self.threads_prev.get(tid).map_or(0, |p| p.1);
                    ThreadCpu {
                        tid: *tid,
                        name: name.clone(),
                        pct: pct(t.saturating_sub(before), self.tck, secs),
                    }
                })
                .collect();
            v.sort_by(|a, b| b.pct.cmp(&a.pct).then(a.tid.cmp(&b.tid)));
            self.threads = v;
        }
        self.threads_prev = cur;
        self.threads_at = Some(now);
        if let Some((busy, total)) = std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|s| parse_host(&s))
        {
            if let Some((b, t)) = self.host_prev {
                self.host = (busy.saturating_sub(b) * 100).checked_div(total.saturating_sub(t));
            }
            self.host_prev = Some((busy, total));
        }
    }

    /// The figure a `cpu:` event names: a group of [`GROUPS`] or `thread
    /// NAME` (every thread whose name starts with NAME, summed).
    pub fn get(&self, what: &str) -> Option<u64> {
        match what {
            "lanyard" => self.lanyard,
            "host" => self.host,
            _ => {
                self.threads_at?;
                let sel: Box<dyn Fn(&str) -> bool> = match what {
                    "workers" => Box::new(|n: &str| n.starts_with(WORKER_PREFIX)),
                    "control-plane" => Box::new(|n: &str| !n.starts_with(WORKER_PREFIX)),
                    _ => {
                        let p = what.strip_prefix("thread ")?.to_string();
                        Box::new(move |n: &str| n.starts_with(&p))
                    }
                };
                if self.threads.is_empty() {
                    return None;
                }
                Some(
                    self.threads
                        .iter()
                        .filter(|t| sel(&t.name))
                        .map(|t| t.pct)
                        .sum(),
                )
            }
        }
    }

    /// For `show event manager`.
    pub fn json(&self) -> Value {
        json!({
            "lanyard": self.lanyard,
            "workers": self.get("workers"),
            "control-plane": self.get("control-plane"),
            "host": self.host,
            "cores": self.cores,
            "threads": self.threads.iter()
                .map(|t| json!({"tid": t.tid, "name": t.name, "pct": t.pct}))
                .collect::<Vec<_>>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_with_odd_names() {
        let l = "1234 (worker 0) x) R 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(parse_stat(l), Some(("worker 0) x".into(), 300)));
        assert_eq!(parse_stat("12 (a) R 1"), None);
        assert_eq!(parse_stat(""), None);
        assert_eq!(
            parse_host("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3\n"),
            Some((150, 1000))
        );
        assert_eq!(parse_host("intr 1 2 3\n"), None);
    }

    /// A thread that burns CPU shows up under its name; the groups and the
    /// process total see it.
    #[test]
    fn per_thread_figures_follow_a_busy_thread() {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let s2 = stop.clone();
        let h = std::thread::Builder::new()
            .name("worker-spin".into())
            .spawn(move || {
                let mut x = 0u64;
                while !s2.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
            .unwrap();
        let mut c = Cpu::default();
        c.sample();
        assert_eq!(c.get("workers"), None, "no interval yet");
        std::thread::sleep(std::time::Duration::from_millis(600));
        c.sample();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        h.join().unwrap();
        let spin = c.get("thread worker-spin").unwrap();
        // A spinning thread gets most of a core even on a shared machine.
        assert!(spin >= 30, "{spin} {:?}", c.threads);
        assert!(c.get("workers").unwrap() >= spin);
        assert!(c.lanyard.unwrap() + 5 >= spin, "{:?}", c.lanyard);
        assert!(c.get("thread nosuch") == Some(0));
        assert!(c.host.is_some());
        assert_eq!(c.get("bogus"), None);
    }
}
