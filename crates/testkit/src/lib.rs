//! Dev-only test helpers for black-box tests of Lanyard on real interfaces.
//!
//! This crate is a *tester*, not part of the switch: it must never depend on
//! Lanyard's own crates (`wire`, `io`, ...), so that a bug there cannot hide
//! itself by being present on both sides of a test. Frames are built and
//! parsed here by hand ([`frame`]), sent and captured on raw `AF_PACKET`
//! sockets written here ([`rawport`]), inside network namespaces created and
//! removed here ([`netns`]); [`switch`] runs the `lanyard` binary under test
//! and reads its management API through its own CLI.
//!
//! It is never shipped in the binary: only `[dev-dependencies]` use it.

pub mod acl;
pub mod flood;
pub mod frame;
pub mod frr;
pub mod igmp;
pub mod ip;
pub mod l2;
pub mod netns;
pub mod nfdump;
pub mod ovs;
pub mod pim;
pub mod pseudowire;
pub mod rawport;
pub mod routes;
pub mod seqrx;
pub mod switch;
pub mod testbed;
pub mod tshark;
pub mod vswitch;

pub use netns::{in_netns, Netns};
pub use rawport::{Capture, CaptureResult, RawPort};
pub use switch::Switch;
pub use testbed::TestBed;

/// True when the process runs as root (namespaces and raw sockets need it).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Returns early from the calling test (after a message) unless it runs as
/// root with the `ip` tool available.
#[macro_export]
macro_rules! require_root {
    () => {
        if !$crate::is_root() {
            eprintln!("SKIPPED: this test needs root (network namespaces, raw sockets)");
            return;
        }
        if !std::path::Path::new("/usr/sbin/ip").exists()
            && !std::path::Path::new("/sbin/ip").exists()
            && !std::path::Path::new("/usr/bin/ip").exists()
        {
            eprintln!("SKIPPED: this test needs iproute2 (`ip`)");
            return;
        }
    };
}

/// A directory for one test's files under the system's temp dir
/// (`lanyard-TAG-PID`), created empty and removed with everything in it
/// when dropped, however the test ends.
pub struct TempDir(std::path::PathBuf);

impl TempDir {
    /// Creates `lanyard-TAG-PID` (emptied first if a crashed run left it).
    pub fn new(tag: &str) -> TempDir {
        let p = std::env::temp_dir().join(format!("lanyard-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create the test's temporary directory");
        TempDir(p)
    }

    /// The directory.
    pub fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
