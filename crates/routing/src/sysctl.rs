//! Per-interface and global sysctls (`/proc/sys/net/...`) of the current
//! network namespace.

use std::io;

/// Set `net.<family>.conf.<ifname>.<key>` (family `ipv4` or `ipv6`).
pub fn set_if(ifname: &str, family: &str, key: &str, value: &str) -> io::Result<()> {
    if ifname.contains('/') || ifname.contains("..") {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "bad name"));
    }
    std::fs::write(format!("/proc/sys/net/{family}/conf/{ifname}/{key}"), value)
}

/// Set `net.<path>` (e.g. `ipv4/ip_forward`).
pub fn set(path: &str, value: &str) -> io::Result<()> {
    std::fs::write(format!("/proc/sys/net/{path}"), value)
}
