//! A send-only `AF_PACKET` socket for the control plane: frames the kernel
//! sends out of a routed interface's TAP are injected on the real port
//! through it. One `send(2)` per frame — a slow path by design (control
//! traffic). It receives nothing (protocol 0), and the workers' receive
//! sockets ignore outgoing frames, so injected frames are not seen again.

use crate::{link, PortError};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

pub struct InjectSocket {
    name: String,
    ifindex: u32,
    fd: OwnedFd,
}

impl InjectSocket {
    /// Open a socket that sends on interface `name`.
    pub fn open(name: &str) -> Result<InjectSocket, PortError> {
        let info = link::query(name).ok_or_else(|| PortError::NoSuchInterface(name.into()))?;
        // SAFETY: plain socket(2) call; the result is checked.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(PortError::Os {
                op: "socket(AF_PACKET)",
                err: io::Error::last_os_error(),
            });
        }
        // SAFETY: `raw` is a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
        let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sa.sll_family = libc::AF_PACKET as u16;
        sa.sll_protocol = 0;
        sa.sll_ifindex = info.ifindex as i32;
        // SAFETY: `sa` is a valid sockaddr_ll and its size is passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(PortError::Os {
                op: "bind(AF_PACKET)",
                err: io::Error::last_os_error(),
            });
        }
        Ok(InjectSocket {
            name: name.to_string(),
            ifindex: info.ifindex,
            fd,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Interface index at open time (a re-created interface gets a new one:
    /// reopen when sending fails with ENXIO/ENODEV).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Send one complete Ethernet frame.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        // SAFETY: `frame` is a valid buffer of the given length.
        let r = unsafe {
            libc::send(
                self.fd.as_raw_fd(),
                frame.as_ptr() as *const libc::c_void,
                frame.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}
