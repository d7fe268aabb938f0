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

/// Raise the numeric `net.<path>` to at least `min`; never lowers it.
/// Returns the value now in force.
pub fn raise(path: &str, min: u64) -> io::Result<u64> {
    let file = format!("/proc/sys/net/{path}");
    let now: u64 = std::fs::read_to_string(&file)?
        .trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("{file}: not a number")))?;
    if now >= min {
        return Ok(now);
    }
    std::fs::write(&file, min.to_string())?;
    Ok(min)
}

/// IPv4 multicast groups one socket may join (`igmp_max_memberships`) for
/// `interfaces` routed interfaces: FRR's ospfd joins AllSPFRouters on every
/// interface it runs on, and AllDRouters where it is (backup) designated
/// router, all with one socket per namespace. Linux's default is 20, so
/// from the 21st routed port on ospfd heard no hello (issue 21).
pub fn igmp_memberships_for(interfaces: usize) -> u64 {
    2 * interfaces as u64 + 64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memberships_cover_two_groups_per_interface() {
        assert!(igmp_memberships_for(0) >= 20);
        assert!(igmp_memberships_for(410) >= 820);
        assert!(igmp_memberships_for(1024) >= 2048);
    }
}
