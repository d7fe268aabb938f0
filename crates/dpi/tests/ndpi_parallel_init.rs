//! nDPI 4.2 initialises libgcrypt inside its module constructor, and
//! libgcrypt aborts the process when two threads do that at once. Workers
//! build their modules in parallel at start, so `Ndpi::new` must take turns.
//! The race only exists before the first module in a process has finished
//! initialising, and it is lost a few times in a hundred, so the test runs
//! it in many fresh child processes of this binary.

use std::process::Command;
use std::sync::{Arc, Barrier};

const CHILD: &str = "LANYARD_NDPI_RACE_CHILD";
const TEST: &str = "modules_built_on_many_threads_at_once_all_work";

#[test]
fn modules_built_on_many_threads_at_once_all_work() {
    if std::env::var_os(CHILD).is_some() {
        race();
        return;
    }
    let me = std::env::current_exe().expect("own path");
    for run in 0..40 {
        let out = Command::new(&me)
            .args(["--exact", TEST, "--nocapture", "--test-threads=1"])
            .env(CHILD, "1")
            .output()
            .expect("child started");
        assert!(
            out.status.success(),
            "run {run}: building nDPI modules on parallel threads failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn race() {
    const THREADS: usize = 8;
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|_| {
            let start = start.clone();
            std::thread::spawn(move || {
                start.wait();
                let m = dpi::ndpi::Ndpi::new().expect("nDPI module");
                let http = m.id("HTTP").expect("nDPI knows HTTP");
                (m.protocols(), m.name(http))
            })
        })
        .collect();
    for h in handles {
        let (protocols, http) = h.join().expect("thread finished");
        assert!(
            protocols > 200,
            "nDPI 4.2 has ~250 protocols, got {protocols}"
        );
        assert_eq!(http, "HTTP");
    }
}
