//! One CPU plan for every device under test.
//!
//! Without a plan, a kernel DUT (bridge, router) forwards inside the
//! generator's `sendmmsg`, on the tester's core, and gets the other core
//! free; a process DUT competes with the tester for both. With the split
//! plan every DUT gets the same share: the tester (transmit and receive
//! threads, and the receive work of its own ports) on the tester CPUs, the
//! DUT (its processes, its ports' receive work moved there by RPS, and its
//! ports' NAPI threads where the device has NAPI: veth with XDP) on the
//! others.

use crate::netns::run;
use crate::LabError;
use serde::{Deserialize, Serialize};

/// A set of CPUs (up to 64) as a bit mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuSet(pub u64);

impl CpuSet {
    /// The set holding CPUs `lo..=hi`.
    pub fn range(lo: usize, hi: usize) -> CpuSet {
        let mut m = 0u64;
        for c in lo..=hi.min(63) {
            m |= 1 << c;
        }
        CpuSet(m)
    }

    /// CPUs in the set, ascending.
    pub fn cpus(&self) -> Vec<usize> {
        (0..64).filter(|c| self.0 & (1 << c) != 0).collect()
    }

    /// `0`, `1-3`, `0,2`: the `taskset -c` / `cpuset` list form.
    pub fn list(&self) -> String {
        let cpus = self.cpus();
        let mut out: Vec<String> = Vec::new();
        let mut i = 0;
        while i < cpus.len() {
            let mut j = i;
            while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
                j += 1;
            }
            out.push(if i == j {
                cpus[i].to_string()
            } else {
                format!("{}-{}", cpus[i], cpus[j])
            });
            i = j + 1;
        }
        out.join(",")
    }

    /// The hexadecimal mask `rps_cpus` takes.
    pub fn hex(&self) -> String {
        format!("{:x}", self.0)
    }

    fn as_cpu_set_t(&self) -> libc::cpu_set_t {
        // SAFETY: cpu_set_t is plain data; CPU_SET writes within it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            for c in self.cpus() {
                libc::CPU_SET(c, &mut set);
            }
            set
        }
    }

    /// Pin task `tid` (0 = the calling thread) to the set. Errors are
    /// returned, not ignored: a task that vanished is the caller's call.
    pub fn pin(&self, tid: i32) -> std::io::Result<()> {
        let set = self.as_cpu_set_t();
        // SAFETY: a valid cpu_set_t of the size passed; affects only `tid`.
        let rc =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

/// Where the tester and the DUT run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CpuPlan {
    /// Nothing pinned, nothing steered: the scheduler decides (kernel DUTs
    /// then forward on the generator's core).
    #[default]
    Shared,
    /// Tester on `tester`, DUT on `dut` (disjoint).
    Split {
        /// Generator, analyzer, the tester ports' receive work.
        tester: CpuSet,
        /// DUT processes, the DUT ports' receive work and NAPI threads.
        dut: CpuSet,
    },
}

/// The plan as a plan file names it (`cpu-plan:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CpuPlanSpec {
    /// Tester on CPU 0, DUT on the others (the default; `shared` on a
    /// one-CPU machine).
    #[default]
    Split,
    /// No pinning or steering.
    Shared,
}

fn online_cpus() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

impl CpuPlan {
    /// The plan a spec means on this machine: `split` needs two CPUs.
    pub fn for_machine(spec: CpuPlanSpec) -> CpuPlan {
        Self::for_cpus(spec, online_cpus())
    }

    /// As [`CpuPlan::for_machine`] with `n` CPUs.
    pub fn for_cpus(spec: CpuPlanSpec, n: usize) -> CpuPlan {
        match spec {
            CpuPlanSpec::Split if n >= 2 => CpuPlan::Split {
                tester: CpuSet::range(0, 0),
                dut: CpuSet::range(1, n - 1),
            },
            _ => CpuPlan::Shared,
        }
    }

    /// The tester's CPUs, when pinned.
    pub fn tester(&self) -> Option<CpuSet> {
        match self {
            CpuPlan::Shared => None,
            CpuPlan::Split { tester, .. } => Some(*tester),
        }
    }

    /// The DUT's CPUs, when pinned.
    pub fn dut(&self) -> Option<CpuSet> {
        match self {
            CpuPlan::Shared => None,
            CpuPlan::Split { dut, .. } => Some(*dut),
        }
    }

    /// One line for the report's test-bed section.
    pub fn describe(&self) -> String {
        match self {
            CpuPlan::Shared => "CPU plan: shared — nothing pinned; kernel DUTs forward on the sender's core (inside the generator's sendmmsg)".into(),
            CpuPlan::Split { tester, dut } => format!(
                "CPU plan: split — tester (generator, analyzer, receive work of its ports by RPS) on CPU {}; DUT (its processes, its ports' receive work by RPS, NAPI threads) on CPU {}",
                tester.list(),
                dut.list()
            ),
        }
    }
}

/// Set `rps_cpus` of every named interface in namespace `ns` to `set`, in
/// one `ip netns exec` (which mounts the namespace's own sysfs).
pub fn steer_receive(ns: &str, ifaces: &[String], set: CpuSet) -> Result<(), LabError> {
    if ifaces.is_empty() {
        return Ok(());
    }
    let mut script = String::new();
    for i in ifaces {
        // Every receive queue of the device (veth has one by default).
        script.push_str(&format!(
            "for q in /sys/class/net/{i}/queues/rx-*; do echo {} > $q/rps_cpus || exit 1; done; ",
            set.hex()
        ));
    }
    run("ip", &["netns", "exec", ns, "sh", "-c", &script]).map(|_| ())
}

/// Turn on threaded NAPI for the named interfaces of `ns` where the device
/// has NAPI (veth only with XDP or GRO: elsewhere the write fails and the
/// receive work stays with RPS). Returns the interfaces that took it.
pub fn threaded_napi(ns: &str, ifaces: &[String]) -> Vec<String> {
    let mut ok = Vec::new();
    for i in ifaces {
        let script = format!("echo 1 > /sys/class/net/{i}/threaded");
        if run("ip", &["netns", "exec", ns, "sh", "-c", &script]).is_ok() {
            ok.push(i.clone());
        }
    }
    ok
}

/// Pin kernel NAPI threads whose name starts with `napi/<prefix>` to `set`.
/// Names are not unique across namespaces, so the prefix is the lab's own
/// port naming (`sw`, `t`). Returns how many were pinned.
pub fn pin_napi_threads(prefix: &str, set: CpuSet) -> usize {
    let want = format!("napi/{prefix}");
    let mut n = 0;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        let comm = comm.trim();
        // `napi/t1-8` must not match `napi/t` + a longer device prefix of
        // another family: the character after the prefix is a digit.
        let rest = comm.strip_prefix(&want);
        if rest.is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit())) && set.pin(pid).is_ok()
        {
            n += 1;
        }
    }
    n
}

/// Pin every thread of every process in namespace `ns` to `set`; threads
/// they start later inherit it. Returns how many threads were pinned.
pub fn pin_namespace_processes(ns: &str, set: CpuSet) -> usize {
    let Ok(out) = run("ip", &["netns", "pids", ns]) else {
        return 0;
    };
    let mut n = 0;
    for pid in out.split_whitespace().filter_map(|p| p.parse::<i32>().ok()) {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            if let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) {
                if set.pin(tid).is_ok() {
                    n += 1;
                }
            }
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_print_as_lists_and_masks() {
        assert_eq!(CpuSet::range(0, 0).list(), "0");
        assert_eq!(CpuSet::range(1, 3).list(), "1-3");
        assert_eq!(CpuSet(0b1011).list(), "0-1,3");
        assert_eq!(CpuSet::range(1, 1).hex(), "2");
        assert_eq!(CpuSet::range(0, 7).hex(), "ff");
    }

    #[test]
    fn split_needs_two_cpus() {
        assert_eq!(CpuPlan::for_cpus(CpuPlanSpec::Split, 1), CpuPlan::Shared);
        let p = CpuPlan::for_cpus(CpuPlanSpec::Split, 2);
        assert_eq!(p.tester(), Some(CpuSet(1)));
        assert_eq!(p.dut(), Some(CpuSet(2)));
        let p = CpuPlan::for_cpus(CpuPlanSpec::Split, 4);
        assert_eq!(p.dut().unwrap().list(), "1-3");
        assert_eq!(CpuPlan::for_cpus(CpuPlanSpec::Shared, 4), CpuPlan::Shared);
        assert!(p.describe().contains("CPU 1-3"));
    }
}
