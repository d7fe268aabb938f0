//! Shared by the lab's test binaries (`mod common;`).
#![allow(dead_code)] // not every test binary uses every helper

use std::path::PathBuf;

/// Measuring tests take the machine to themselves: run in parallel on two
/// cores, one test's generator skews another's rates.
static MEASURE: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn measuring() -> std::sync::MutexGuard<'static, ()> {
    MEASURE.lock().unwrap_or_else(|e| e.into_inner())
}

/// True when running as root; otherwise says the test is skipped.
pub fn root() -> bool {
    // SAFETY: geteuid has no preconditions.
    let r = unsafe { libc::geteuid() } == 0;
    if !r {
        eprintln!("skipped: needs root");
    }
    r
}

/// The `lanyard` binary: `$LANYARD_BIN`, else the one cargo built next to
/// this test (`target/<profile>/lanyard`).
pub fn lanyard_bin() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("LANYARD_BIN") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("lanyard");
    p.exists().then_some(p)
}

/// Root and a `lanyard` binary, or None after saying which is missing
/// (the test is skipped).
pub fn root_and_lanyard() -> Option<PathBuf> {
    if !root() {
        return None;
    }
    let bin = lanyard_bin();
    if bin.is_none() {
        eprintln!("skipped: no lanyard binary (build it, or set LANYARD_BIN)");
    }
    bin
}

/// Runs the plan `yaml` quietly with the `lanyard` at `bin`, its outputs
/// in a fresh temporary directory named after `tag`; returns the summary
/// and that directory (the caller removes it when done with it).
pub fn run_plan_text(bin: PathBuf, tag: &str, yaml: &str) -> (lab::Summary, PathBuf) {
    let plan = lab::Plan::parse(yaml).unwrap();
    let out = std::env::temp_dir().join(format!("lab-test-{tag}-{}", std::process::id()));
    let opts = lab::LabOptions {
        lanyard_bin: bin,
        out_dir: Some(out.clone()),
        quiet: true,
    };
    (lab::run_plan(&plan, &opts).unwrap(), out)
}
