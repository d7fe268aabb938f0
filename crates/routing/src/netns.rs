//! Network namespaces of VRFs (docs/vrf.md): each VRF's TAP twins live
//! in a namespace of their own, so overlapping addresses never meet in one
//! kernel stack and FRR's netns VRF backend (`zebra -n`) sees one VRF per
//! namespace. Namespaces are named like iproute2's (`/run/netns/NAME`),
//! so `ip netns exec NAME …` and zebra find them.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

const NETNS_DIR: &str = "/run/netns";

fn path_of(name: &str) -> io::Result<PathBuf> {
    if name.is_empty() || name.contains('/') || name == "." || name == ".." {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad namespace name {name:?}"),
        ));
    }
    Ok(PathBuf::from(NETNS_DIR).join(name))
}

/// Opens namespace `name`, creating it (as `ip netns add` does: a new
/// network namespace kept alive by a bind mount) when it does not exist.
/// Returns the handle and whether it was created.
pub fn ensure(name: &str) -> io::Result<(File, bool)> {
    let path = path_of(name)?;
    if let Ok(f) = File::open(&path) {
        return Ok((f, false));
    }
    std::fs::create_dir_all(NETNS_DIR)?;
    let p = path.clone();
    // unshare(2) moves the calling thread: do it on a thread of its own.
    std::thread::spawn(move || -> io::Result<()> {
        File::create(&p)?;
        let fail = |p: &PathBuf| {
            let e = io::Error::last_os_error();
            let _ = std::fs::remove_file(p);
            Err(e)
        };
        // SAFETY: plain syscall affecting only this thread.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return fail(&p);
        }
        let src = std::ffi::CString::new("/proc/thread-self/ns/net").unwrap_or_default();
        let dst = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap_or_default();
        // SAFETY: NUL-terminated paths; a bind mount of this thread's
        // namespace onto the file just created.
        let rc = unsafe {
            libc::mount(
                src.as_ptr(),
                dst.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return fail(&p);
        }
        Ok(())
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))??;
    Ok((File::open(&path)?, true))
}

/// Removes namespace `name` created by [`ensure`] (unmount and unlink);
/// it goes away when nothing else holds it.
pub fn remove(name: &str) -> io::Result<()> {
    let path = path_of(name)?;
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: NUL-terminated path.
    unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    std::fs::remove_file(&path)
}

/// Runs `f` on a thread inside namespace `ns` and returns its result.
/// Sockets `f` opens stay in that namespace.
pub fn run_in<T: Send + 'static>(
    ns: &File,
    f: impl FnOnce() -> T + Send + 'static,
) -> io::Result<T> {
    let ns = ns.try_clone()?;
    std::thread::spawn(move || -> io::Result<T> {
        // SAFETY: setns on a namespace descriptor; affects only this thread.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(f())
    })
    .join()
    .map_err(|_| io::Error::other("namespace thread panicked"))?
}
