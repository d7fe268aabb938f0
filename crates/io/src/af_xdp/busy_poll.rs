//! Busy polling of an AF_XDP socket (docs/io.md "Busy polling").
//!
//! Without it the kernel moves a frame into the socket's receive ring in
//! the device's NAPI poll — a softirq, or a `napi/…` thread with threaded
//! NAPI — and wakes the worker: on one CPU every batch costs a switch
//! between that thread and the worker. With it the worker runs the NAPI
//! poll itself, in a `recvfrom(MSG_DONTWAIT)` per receive call (one NAPI
//! poll of up to `budget` frames: the kernel's `sk_busy_loop` on a
//! non-blocking socket), and the kernel leaves the device's NAPI to it:
//!
//! - `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` (µs) and `SO_BUSY_POLL_BUDGET`
//!   on the socket;
//! - the device's `napi_defer_hard_irqs` (2) and `gro_flush_timeout`
//!   (`napi_timeout_us`) in sysfs: after a busy poll the kernel keeps the
//!   device's notification ("interrupt") masked and only a watchdog of
//!   that length runs NAPI if the worker stops polling; after two empty
//!   watchdog rounds it unmasks. The previous values are put back when the
//!   port closes.
//!
//! Busy polling needs the socket to carry the NAPI id of its queue:
//! `sk_busy_loop` polls nothing for id 0. Since Linux 6.13 ("xsk: Bring
//! back busy polling support", after "net: napi: Add napi_config" moved
//! NAPI ids to `napi_enable`) the kernel gives an AF_XDP socket its id in
//! `xsk_bind` only, from the NAPI the driver registered for the queue
//! (`netif_queue_set_napi`; at first only for a zero-copy socket); no
//! frame sets it later. veth registers none: its sockets keep id 0 and
//! busy polling cannot work there (measured on this machine's 6.18,
//! docs/io.md "Busy polling"). So the device's NAPI
//! settings are changed only for a socket that has an id after bind
//! (masking a device nobody polls would only hold frames for the
//! watchdog); without one, the port notes it as refused and runs as
//! without busy polling. An id that appears later (a kernel that marks
//! copy-mode sockets on receive) starts the kick, not the device settings.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

const SO_BUSY_POLL: libc::c_int = 46;
const SO_INCOMING_NAPI_ID: libc::c_int = 56;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// `napi_defer_hard_irqs` while busy polling: empty watchdog rounds before
/// the kernel gives the device's NAPI back to its notification (the value
/// of the kernel's AF_XDP documentation).
pub const DEFER_HARD_IRQS: u32 = 2;

/// Busy-poll settings of a port (`switch.af-xdp-busy-poll`, docs/config.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BusyPoll {
    /// `SO_BUSY_POLL_BUDGET`: frames one busy poll takes from the driver.
    pub budget: u16,
    /// `SO_BUSY_POLL`: µs a blocking busy poll may spin (a non-blocking
    /// one polls once; the kernel busy polls only when it is not 0).
    pub usecs: u32,
    /// The device's `gro_flush_timeout` in µs: the watchdog that runs NAPI
    /// when the worker does not.
    pub napi_timeout_us: u32,
}

impl Default for BusyPoll {
    fn default() -> Self {
        BusyPoll {
            budget: 64,
            usecs: 20,
            napi_timeout_us: 200,
        }
    }
}

impl BusyPoll {
    /// How long the worker keeps polling after its last frame: until the
    /// kernel has unmasked the device (after [`DEFER_HARD_IRQS`] empty
    /// watchdog rounds). A worker asleep before that would leave a frame
    /// waiting for the watchdog instead of waking at once.
    pub fn idle_spin(&self) -> Duration {
        Duration::from_micros(self.napi_timeout_us as u64 * DEFER_HARD_IRQS as u64)
    }
}

/// The device settings busy polling changed (put back at close).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Saved {
    /// `napi_defer_hard_irqs` and `gro_flush_timeout` before ours, if we
    /// set them.
    pub napi: Option<(u32, u64)>,
}

/// Busy polling of one port: its settings, what the kernel took, and what
/// it refused (for the log and `show interfaces`).
#[derive(Debug, Clone)]
pub(crate) struct BusyState {
    pub opts: BusyPoll,
    /// The socket options took: a kick is worth its system call once the
    /// socket has a NAPI id.
    pub sockopts: bool,
    pub saved: Saved,
    pub refused: Vec<String>,
}

fn setsockopt_int(fd: RawFd, name: libc::c_int, val: u32) -> io::Result<()> {
    let v = val as libc::c_int;
    // SAFETY: an int option of the size passed, on a descriptor we hold.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            name,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Set the busy-poll socket options on `fd`; what the kernel refused.
pub(crate) fn set_sockopts(fd: &impl AsRawFd, o: &BusyPoll) -> Vec<String> {
    let fd = fd.as_raw_fd();
    [
        ("SO_PREFER_BUSY_POLL", SO_PREFER_BUSY_POLL, 1),
        ("SO_BUSY_POLL", SO_BUSY_POLL, o.usecs),
        ("SO_BUSY_POLL_BUDGET", SO_BUSY_POLL_BUDGET, o.budget as u32),
    ]
    .into_iter()
    .filter_map(|(n, opt, v)| {
        setsockopt_int(fd, opt, v)
            .err()
            .map(|e| format!("{n}: {e}"))
    })
    .collect()
}

/// The socket's NAPI id (`SO_INCOMING_NAPI_ID`; the kernel answers 0 for
/// none or an invalid one).
pub fn napi_id(fd: &impl AsRawFd) -> u32 {
    let mut v: libc::c_uint = 0;
    let mut len = std::mem::size_of::<libc::c_uint>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `v`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            SO_INCOMING_NAPI_ID,
            &mut v as *mut libc::c_uint as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        0
    } else {
        v
    }
}

/// One busy poll: a non-blocking zero-length receive runs the socket's
/// NAPI poll once (`sk_busy_loop`) in this thread.
#[inline]
pub(crate) fn kick(fd: RawFd) {
    // SAFETY: a zero-length, non-blocking receive with no buffer.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// `/sys/class/net/NAME` if this thread's `/sys` shows the interface with
/// index `ifindex` (not another namespace's of the same name).
fn sysfs_dir(name: &str, ifindex: u32) -> Option<String> {
    let dir = format!("/sys/class/net/{name}");
    let idx = std::fs::read_to_string(format!("{dir}/ifindex")).ok()?;
    (idx.trim().parse::<u32>().ok()? == ifindex).then_some(dir)
}

fn read_num(path: &str) -> io::Result<u64> {
    std::fs::read_to_string(path)?
        .trim()
        .parse::<u64>()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// The device's `napi_defer_hard_irqs` and `gro_flush_timeout` (ns).
pub fn device_napi(name: &str, ifindex: u32) -> io::Result<(u32, u64)> {
    let dir = sysfs_dir(name, ifindex).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "/sys does not show this interface (another network namespace?)",
        )
    })?;
    let defer = read_num(&format!("{dir}/napi_defer_hard_irqs"))?;
    let timeout = read_num(&format!("{dir}/gro_flush_timeout"))?;
    Ok((defer as u32, timeout))
}

/// Write the device's `napi_defer_hard_irqs` and `gro_flush_timeout` (ns).
pub(crate) fn set_device_napi(
    name: &str,
    ifindex: u32,
    defer: u32,
    timeout_ns: u64,
) -> io::Result<()> {
    let dir = sysfs_dir(name, ifindex)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "not in this /sys"))?;
    std::fs::write(format!("{dir}/gro_flush_timeout"), timeout_ns.to_string())?;
    std::fs::write(format!("{dir}/napi_defer_hard_irqs"), defer.to_string())
}

/// After the socket is bound: the device's NAPI settings (the previous
/// ones are returned, to put back).
pub(crate) fn set_device(
    name: &str,
    ifindex: u32,
    o: &BusyPoll,
    refused: &mut Vec<String>,
) -> Option<(u32, u64)> {
    let prev = match device_napi(name, ifindex) {
        Ok(p) => p,
        Err(e) => {
            refused.push(format!("napi_defer_hard_irqs/gro_flush_timeout: {e}"));
            return None;
        }
    };
    match set_device_napi(
        name,
        ifindex,
        DEFER_HARD_IRQS,
        o.napi_timeout_us as u64 * 1000,
    ) {
        Ok(()) => Some(prev),
        Err(e) => {
            refused.push(format!("napi_defer_hard_irqs/gro_flush_timeout: {e}"));
            // Half written? Put back what we read.
            let _ = set_device_napi(name, ifindex, prev.0, prev.1);
            None
        }
    }
}

/// Put back what [`set_device`] changed.
pub(crate) fn restore(name: &str, ifindex: u32, saved: &Saved) {
    if let Some((defer, timeout)) = saved.napi {
        let _ = set_device_napi(name, ifindex, defer, timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_spins_until_the_kernel_unmasks_the_device() {
        let b = BusyPoll {
            napi_timeout_us: 150,
            ..BusyPoll::default()
        };
        assert_eq!(b.idle_spin(), Duration::from_micros(300));
    }

    #[test]
    fn a_missing_interface_is_refused_not_fatal() {
        let mut refused = Vec::new();
        assert_eq!(
            set_device("lanyard-none0", 999_999, &BusyPoll::default(), &mut refused),
            None
        );
        assert_eq!(refused.len(), 1, "{refused:?}");
    }

    /// The device settings are written and put back (root: a veth pair in
    /// this namespace, whose /sys this thread sees; deleted at the end).
    #[test]
    fn device_settings_are_set_and_put_back() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: needs root");
            return;
        }
        struct Veth(String);
        impl Drop for Veth {
            fn drop(&mut self) {
                let _ = std::process::Command::new("ip")
                    .args(["link", "del", &self.0])
                    .output();
            }
        }
        let name = format!("lybp{}", std::process::id() % 100_000);
        let ok = std::process::Command::new("ip")
            .args(["link", "add", &name, "type", "veth", "peer", "name"])
            .arg(format!("{name}p"))
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "ip link add veth");
        let _veth = Veth(name.clone());
        let idx = crate::link::query(&name).expect("veth").ifindex;
        let before = device_napi(&name, idx).expect("read");
        let mut refused = Vec::new();
        let o = BusyPoll {
            napi_timeout_us: 120,
            ..BusyPoll::default()
        };
        let prev = set_device(&name, idx, &o, &mut refused);
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(prev, Some(before));
        assert_eq!(device_napi(&name, idx).unwrap(), (DEFER_HARD_IRQS, 120_000));
        restore(&name, idx, &Saved { napi: prev });
        assert_eq!(device_napi(&name, idx).unwrap(), before);
    }
}
