//! One switch per management socket.
//!
//! Before a switch touches anything (TAPs, ports, the socket file) it
//! claims its management socket: an exclusive `flock(2)` on a lock file
//! beside the socket (`<socket>.lock`, holding the owner's PID), then a
//! check that no switch answers on the socket itself (a switch that holds
//! no lock, e.g. an older version). A second `lanyard run` with the same
//! socket stops there with an error naming the running switch, and
//! leaves the running switch's socket, ports and lock alone.
//!
//! The lock is released when the process exits, however it exits; the
//! lock file is removed by its owner on a clean stop. `lanyard restart`
//! re-executes the binary with the locked descriptor inherited
//! ([`LOCK_FD_ENV`]), so no other switch can slip in during the exec.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Environment of a restarted switch: the descriptor of its inherited lock.
pub const LOCK_FD_ENV: &str = "LANYARD_LOCK_FD";

/// The claim on a management socket; dropping it removes the lock file
/// (if it is still ours) and releases the lock.
#[derive(Debug)]
pub struct InstanceLock {
    fd: OwnedFd,
    path: PathBuf,
}

/// `<socket>.lock`.
pub fn lock_path(socket: &Path) -> PathBuf {
    let mut s = socket.as_os_str().to_owned();
    s.push(".lock");
    PathBuf::from(s)
}

fn flock_nb(fd: RawFd) -> io::Result<()> {
    // SAFETY: flock(2) on a descriptor we own; no memory is passed.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn same_file(fd: &OwnedFd, path: &Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    // SAFETY: fstat fills a plain-data struct; the descriptor is ours.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return false;
    }
    st.st_dev == meta.dev() && st.st_ino == meta.ino()
}

fn open_lock(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: open(2) with a NUL-terminated path; the result is checked.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_RDWR | libc::O_CREAT | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Claim `socket` for this process; see the module documentation.
pub fn claim(socket: &Path) -> Result<InstanceLock, String> {
    let lock = lock_path(socket);
    if let Some(dir) = socket.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let fd = match inherited(&lock) {
        Some(fd) => fd,
        None => take(&lock, socket)?,
    };
    // Dropped on any error below: the lock file goes with it.
    let me = InstanceLock { fd, path: lock };
    // With the lock held, a socket file that nobody answers on is a dead
    // switch's leftover; one that answers belongs to a switch that runs
    // without this lock (an older version): leave it alone.
    match std::fs::symlink_metadata(socket) {
        Ok(m) if !m.file_type().is_socket() => {
            return Err(format!(
                "management socket {}: exists and is not a socket; not touching it",
                socket.display()
            ))
        }
        Ok(_) => {
            if UnixStream::connect(socket).is_ok() {
                return Err(format!(
                    "management socket {} is in use by a running switch; \
                     stop it first, or give this one another socket \
                     (--socket, LANYARD_SOCKET or management.socket)",
                    socket.display()
                ));
            }
            std::fs::remove_file(socket)
                .map_err(|e| format!("stale management socket {}: {e}", socket.display()))?;
        }
        Err(_) => {}
    }
    me.write_pid();
    Ok(me)
}

/// A lock handed over by `lanyard restart` (same process, new image).
fn inherited(lock: &Path) -> Option<OwnedFd> {
    let v = std::env::var(LOCK_FD_ENV).ok()?;
    std::env::remove_var(LOCK_FD_ENV);
    let raw: RawFd = v.parse().ok()?;
    // SAFETY: F_GETFD only asks whether the descriptor is open.
    if raw < 0 || unsafe { libc::fcntl(raw, libc::F_GETFD) } < 0 {
        return None;
    }
    // SAFETY: the predecessor image left this descriptor open for us and
    // nothing else in this image knows it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // Same open file description: the lock is already ours and flock
    // succeeds again; anything else is not our lock.
    if !same_file(&fd, lock) || flock_nb(fd.as_raw_fd()).is_err() {
        return None;
    }
    // SAFETY: F_SETFD on our descriptor: close it on any later exec.
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) };
    Some(fd)
}

fn take(lock: &Path, socket: &Path) -> Result<OwnedFd, String> {
    loop {
        let fd = open_lock(lock).map_err(|e| format!("lock file {}: {e}", lock.display()))?;
        if let Err(e) = flock_nb(fd.as_raw_fd()) {
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let pid = std::fs::read_to_string(lock).unwrap_or_default();
                let pid = pid.trim();
                return Err(format!(
                    "management socket {} is in use by a running switch{} (lock {}); \
                     stop it first, or give this one another socket \
                     (--socket, LANYARD_SOCKET or management.socket)",
                    socket.display(),
                    if pid.is_empty() {
                        String::new()
                    } else {
                        format!(", pid {pid}")
                    },
                    lock.display()
                ));
            }
            return Err(format!("lock {}: {e}", lock.display()));
        }
        // The owner removes the file as it stops: if it did so between our
        // open and our flock, we locked a file nobody else will see.
        if same_file(&fd, lock) {
            return Ok(fd);
        }
    }
}

impl InstanceLock {
    fn write_pid(&self) {
        let pid = format!("{}\n", std::process::id());
        // SAFETY: ftruncate/pwrite on our descriptor with a valid buffer.
        unsafe {
            libc::ftruncate(self.fd.as_raw_fd(), 0);
            libc::pwrite(
                self.fd.as_raw_fd(),
                pid.as_ptr() as *const libc::c_void,
                pid.len(),
                0,
            );
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keep the lock across `exec`: clears close-on-exec and returns the
    /// descriptor for [`LOCK_FD_ENV`]. The lock must then not be dropped.
    pub fn keep_across_exec(&self) -> RawFd {
        let fd = self.fd.as_raw_fd();
        // SAFETY: F_SETFD on our descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFD, 0) };
        fd
    }
}

impl Drop for InstanceLock {
    fn drop(&mut self) {
        if same_file(&self.fd, &self.path) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("lanyard-lock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn second_claim_is_refused_and_touches_nothing() {
        let d = dir("second");
        let sock = d.join("s.sock");
        let a = claim(&sock).expect("first claim");
        // A listening socket, as a running switch has.
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = claim(&sock).expect_err("second claim");
        assert!(e.contains("in use by a running switch"), "{e}");
        assert!(e.contains(&format!("pid {}", std::process::id())), "{e}");
        assert!(sock.exists(), "the running switch's socket stays");
        assert!(a.path().exists());
        drop(a);
        assert!(
            !lock_path(&sock).exists(),
            "the owner removes its lock file"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn stale_socket_is_replaced_and_live_unlocked_one_is_not() {
        let d = dir("stale");
        let sock = d.join("s.sock");
        {
            // A socket file whose listener is gone: a crashed switch.
            let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        }
        assert!(sock.exists());
        let a = claim(&sock).expect("stale socket is not a switch");
        assert!(!sock.exists(), "stale socket removed under the lock");
        drop(a);
        // A live socket without a lock (a switch of an older version).
        let _l = std::os::unix::net::UnixListener::bind(&sock).unwrap();
        let e = claim(&sock).expect_err("live socket");
        assert!(e.contains("in use"), "{e}");
        assert!(sock.exists());
        assert!(
            !lock_path(&sock).exists(),
            "a refused claim leaves no lock file"
        );
        // Not a socket at all.
        let f = d.join("plain");
        std::fs::write(&f, b"x").unwrap();
        let e = claim(&f).expect_err("regular file");
        assert!(e.contains("not a socket"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"x");
        let _ = std::fs::remove_dir_all(&d);
    }
}
