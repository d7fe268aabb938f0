//! Interface state through `ioctl(2)` on a throwaway datagram socket.
//!
//! Unlike `/sys/class/net`, which shows the network namespace `/sys` was
//! mounted in, these calls see the namespace of the *calling thread*.

use crate::PortError;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// What the kernel says about one interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkInfo {
    pub ifindex: u32,
    /// `IFF_UP`: administratively up.
    pub admin_up: bool,
    /// `IFF_RUNNING`: operationally up (carrier present and admin up).
    pub oper_up: bool,
    pub mtu: u32,
}

/// Look an interface up; `None` if it does not exist (or the name is invalid).
pub fn query(name: &str) -> Option<LinkInfo> {
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    ioctl(&sock, libc::SIOCGIFINDEX, &mut req).ok()?;
    // SAFETY: SIOCGIFINDEX filled the `ifru_ifindex` member of the union.
    let ifindex = unsafe { req.ifr_ifru.ifru_ifindex } as u32;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).ok()?;
    // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member.
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    ioctl(&sock, libc::SIOCGIFMTU, &mut req).ok()?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;
    Some(LinkInfo {
        ifindex,
        admin_up: flags & libc::IFF_UP != 0,
        oper_up: flags & libc::IFF_RUNNING != 0,
        mtu,
    })
}

/// The interface's MAC address (`SIOCGIFHWADDR`); `None` if it does not
/// exist.
pub fn mac(name: &str) -> Option<[u8; 6]> {
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    ioctl(&sock, libc::SIOCGIFHWADDR, &mut req).ok()?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(data) {
        *d = s as u8;
    }
    Some(mac)
}

/// Set `IFF_UP` on the interface (no-op if already up).
pub fn set_up(name: &str) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCGIFFLAGS", e))?;
    // SAFETY: SIOCGIFFLAGS filled `ifru_flags`; we write the same member back.
    unsafe {
        if req.ifr_ifru.ifru_flags as libc::c_int & libc::IFF_UP != 0 {
            return Ok(());
        }
        req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
    }
    ioctl(&sock, libc::SIOCSIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCSIFFLAGS", e))
}

/// Set the interface MTU.
pub fn set_mtu(name: &str, mtu: u32) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    req.ifr_ifru.ifru_mtu = mtu as libc::c_int;
    ioctl(&sock, libc::SIOCSIFMTU, &mut req).map_err(|e| map_err(name, "SIOCSIFMTU", e))
}

/// Disable IPv6 on the interface so the kernel sends no neighbour discovery
/// or MLD frames of its own on a switch port. A kernel without IPv6 (no
/// `/proc/sys/net/ipv6`) is fine.
pub fn disable_ipv6(name: &str) -> Result<(), PortError> {
    if !valid_name(name) {
        return Err(PortError::NoSuchInterface(name.to_string()));
    }
    let path = format!("/proc/sys/net/ipv6/conf/{name}/disable_ipv6");
    match std::fs::write(&path, b"1") {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if std::path::Path::new("/proc/sys/net/ipv6/conf").exists() && query(name).is_none() {
                Err(PortError::NoSuchInterface(name.to_string()))
            } else {
                Ok(())
            }
        }
        Err(err) => Err(PortError::Os {
            op: "disable_ipv6",
            err,
        }),
    }
}

pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() < libc::IFNAMSIZ && !name.bytes().any(|b| b == 0 || b == b'/')
}

pub(crate) fn map_err(name: &str, op: &'static str, err: io::Error) -> PortError {
    match err.raw_os_error() {
        Some(libc::ENODEV) | Some(libc::ENXIO) => PortError::NoSuchInterface(name.to_string()),
        Some(libc::ENETDOWN) => PortError::Down(name.to_string()),
        _ => PortError::Os { op, err },
    }
}

fn ctl_socket() -> io::Result<OwnedFd> {
    for family in [libc::AF_INET, libc::AF_PACKET, libc::AF_UNIX] {
        // SAFETY: plain socket(2) call; the result is checked before use.
        let fd = unsafe { libc::socket(family, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd >= 0 {
            // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
    }
    Err(io::Error::last_os_error())
}

fn ifreq(name: &str) -> Result<libc::ifreq, PortError> {
    if !valid_name(name) {
        return Err(PortError::NoSuchInterface(name.to_string()));
    }
    // SAFETY: `ifreq` is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    Ok(req)
}

fn ioctl(sock: &OwnedFd, request: libc::c_ulong, req: &mut libc::ifreq) -> io::Result<()> {
    // SAFETY: every request used here reads/writes a `struct ifreq`, and `req`
    // is a valid, exclusively borrowed one for the duration of the call.
    let r = unsafe { libc::ioctl(sock.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Link events from the kernel (rtnetlink `RTMGRP_LINK`), so a carrier
/// change is seen microseconds after it happens instead of at the next
/// poll. The messages are not parsed: any event means "look again".
pub struct LinkMonitor {
    fd: OwnedFd,
}

impl LinkMonitor {
    /// Subscribe in the calling thread's network namespace.
    pub fn open() -> io::Result<LinkMonitor> {
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: sockaddr_nl is plain data; zeroed is a valid value.
        let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        sa.nl_family = libc::AF_NETLINK as u16;
        sa.nl_groups = libc::RTMGRP_LINK as u32;
        // SAFETY: sa is a valid sockaddr_nl and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(LinkMonitor { fd })
    }

    /// Wait up to `timeout` for events; true if any arrived (all pending
    /// messages are consumed). An overrun (ENOBUFS) counts as an event.
    pub fn wait(&self, timeout: std::time::Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe {
            libc::poll(
                &mut pfd,
                1,
                timeout.as_millis().min(i32::MAX as u128) as i32,
            )
        };
        if n <= 0 {
            return false;
        }
        let mut buf = [0u8; 8192];
        let mut any = false;
        loop {
            // SAFETY: buf is valid for its length.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr() as *mut libc::c_void,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r > 0 {
                any = true;
                continue;
            }
            if r < 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ENOBUFS) {
                any = true;
                continue;
            }
            return any;
        }
    }
}

/// Clear `IFF_UP` (administratively down; the peer loses carrier): how
/// the switch err-disables a port.
pub fn set_down(name: &str) -> Result<(), PortError> {
    let sock = ctl_socket().map_err(|err| PortError::Os { op: "socket", err })?;
    let mut req = ifreq(name)?;
    ioctl(&sock, libc::SIOCGIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCGIFFLAGS", e))?;
    // SAFETY: SIOCGIFFLAGS filled `ifru_flags`; we write the same member back.
    unsafe {
        if req.ifr_ifru.ifru_flags as libc::c_int & libc::IFF_UP == 0 {
            return Ok(());
        }
        req.ifr_ifru.ifru_flags &= !(libc::IFF_UP as libc::c_short);
    }
    ioctl(&sock, libc::SIOCSIFFLAGS, &mut req).map_err(|e| map_err(name, "SIOCSIFFLAGS", e))
}

/// The link speed in Mbit/s the driver reports (ethtool `ETHTOOL_GSET`;
/// a veth says 10,000), `None` if it reports none (down, unknown).
pub fn speed_mbps(name: &str) -> Option<u32> {
    /// `struct ethtool_cmd` (<linux/ethtool.h>), the legacy query every
    /// driver with link settings answers.
    #[repr(C)]
    #[derive(Default)]
    struct EthtoolCmd {
        cmd: u32,
        supported: u32,
        advertising: u32,
        speed: u16,
        duplex: u8,
        port: u8,
        phy_address: u8,
        transceiver: u8,
        autoneg: u8,
        mdio_support: u8,
        maxtxpkt: u32,
        maxrxpkt: u32,
        speed_hi: u16,
        eth_tp_mdix: u8,
        eth_tp_mdix_ctrl: u8,
        lp_advertising: u32,
        reserved: [u32; 2],
    }
    const ETHTOOL_GSET: u32 = 1;
    const SIOCETHTOOL: libc::c_ulong = 0x8946;
    let sock = ctl_socket().ok()?;
    let mut req = ifreq(name).ok()?;
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..EthtoolCmd::default()
    };
    // The kernel writes the answer through `ifr_data` into `cmd`, which
    // outlives the call and is laid out as `struct ethtool_cmd`.
    req.ifr_ifru.ifru_data = (&mut cmd as *mut EthtoolCmd).cast();
    ioctl(&sock, SIOCETHTOOL, &mut req).ok()?;
    let speed = u32::from(cmd.speed_hi) << 16 | u32::from(cmd.speed);
    // SPEED_UNKNOWN is -1 (all ones); 0 means nothing useful either.
    (speed != 0 && speed != u32::MAX).then_some(speed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_exists_and_bogus_does_not() {
        let lo = query("lo").expect("lo exists in every namespace");
        assert!(lo.ifindex >= 1 && lo.mtu > 0);
        assert!(query("lyio-nonexistent0").is_none());
        assert!(query("").is_none());
        assert!(query("a-name-that-is-way-too-long").is_none());
        assert!(matches!(
            set_mtu("lyio-nonexistent0", 1500),
            Err(PortError::NoSuchInterface(_))
        ));
    }
}
