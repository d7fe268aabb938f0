//! What a DUT is given for a multicast test: the pattern of sources,
//! receivers and groups ([`McPattern`]), and, for the Linux router, the
//! kernel multicast routes it is set up with ([`KernelMroutes`]).

use crate::plan::Multicast;
use crate::sig::host_ip;

/// The membership pattern: which DUT configuration (static multicast
/// routes) a test needs. Copy + Eq so it can be part of `dut::Setup`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct McPattern {
    /// Source ports `0..sources`.
    pub sources: usize,
    /// Receiver ports `sources..sources + receivers`.
    pub receivers: usize,
    /// Groups in all.
    pub groups: u32,
    /// Receivers per group (None: all).
    pub replication: Option<usize>,
    /// First group address.
    pub first_group: [u8; 4],
}

impl McPattern {
    /// The pattern of a multicast test.
    pub fn of(m: &Multicast) -> McPattern {
        McPattern {
            sources: m.sources,
            receivers: m.receivers,
            groups: m.groups,
            replication: m.replication,
            first_group: m.first_group,
        }
    }

    /// Address of group `g` (0-based).
    pub fn group(&self, g: u32) -> [u8; 4] {
        u32::from_be_bytes(self.first_group)
            .wrapping_add(g)
            .to_be_bytes()
    }

    /// Tester port of receiver `r` (0-based among receivers).
    pub fn receiver_port(&self, r: usize) -> usize {
        self.sources + r
    }

    /// Receivers (0-based) that join group `g`: all, or `k` consecutive
    /// ones starting at `g * k` (mod receivers), so the joins spread
    /// round-robin and every receiver gets about `groups * k / receivers`.
    pub fn members(&self, g: u32) -> Vec<usize> {
        match self.replication {
            None => (0..self.receivers).collect(),
            Some(k) => {
                let mut v: Vec<usize> = (0..k)
                    .map(|j| (g as usize * k + j) % self.receivers)
                    .collect();
                v.sort_unstable();
                v.dedup();
                v
            }
        }
    }

    /// Groups (0-based) receiver `r` joins.
    pub fn groups_of(&self, r: usize) -> Vec<u32> {
        (0..self.groups)
            .filter(|&g| self.members(g).contains(&r))
            .collect()
    }

    /// Source addresses (the hosts behind the source ports).
    pub fn source_ips(&self) -> Vec<[u8; 4]> {
        (0..self.sources).map(host_ip).collect()
    }

    /// (source, group, outgoing receiver ports) of every (S,G) route, for
    /// DUTs configured with static multicast routes.
    pub fn routes(&self) -> Vec<(usize, [u8; 4], Vec<usize>)> {
        let mut v = Vec::new();
        for s in 0..self.sources {
            for g in 0..self.groups {
                let oifs = self
                    .members(g)
                    .into_iter()
                    .map(|r| self.receiver_port(r))
                    .collect();
                v.push((s, self.group(g), oifs));
            }
        }
        v
    }
}

/// Static (S,G) routes in the Linux kernel of the DUT namespace, for the
/// `linux-router` driver: without a routing daemon nothing else fills the
/// kernel's multicast forwarding cache. Holds the `MRT_INIT` socket (the
/// kernel flushes the routes when it closes).
pub struct KernelMroutes {
    _fd: std::os::fd::OwnedFd,
    /// Routes installed.
    pub routes: usize,
}

const MRT_INIT: libc::c_int = 200;
const MRT_ADD_VIF: libc::c_int = 202;
const MRT_ADD_MFC: libc::c_int = 204;
const VIFF_USE_IFINDEX: u8 = 0x8;
/// Kernel limit on multicast interfaces (`MAXVIFS`).
pub const MAXVIFS: usize = 32;

#[repr(C)]
struct VifCtl {
    vifi: u16,
    flags: u8,
    threshold: u8,
    rate_limit: u32,
    lcl_ifindex: i32,
    rmt_addr: u32,
}

#[repr(C)]
struct MfcCtl {
    origin: [u8; 4],
    group: [u8; 4],
    parent: u16,
    ttls: [u8; MAXVIFS],
    pkt_cnt: u32,
    byte_cnt: u32,
    wrong_if: u32,
    expire: i32,
}

impl KernelMroutes {
    /// In the current thread's network namespace: one VIF per `ifnames`
    /// entry (VIF i = port i) and one MFC entry per route of `p`.
    pub fn install(ifnames: &[String], p: &McPattern) -> std::io::Result<KernelMroutes> {
        use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
        if ifnames.len() > MAXVIFS {
            return Err(std::io::Error::other(format!(
                "{} ports: the kernel routes multicast between at most {MAXVIFS} interfaces",
                ifnames.len()
            )));
        }
        // SAFETY: plain socket(2); checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_IGMP) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let set = |opt: libc::c_int, p: *const libc::c_void, len: usize| -> std::io::Result<()> {
            // SAFETY: p points to a live value of `len` bytes for the call.
            let r = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::IPPROTO_IP,
                    opt,
                    p,
                    len as libc::socklen_t,
                )
            };
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        let one: libc::c_int = 1;
        set(
            MRT_INIT,
            &one as *const _ as *const libc::c_void,
            std::mem::size_of::<libc::c_int>(),
        )?;
        for (i, name) in ifnames.iter().enumerate() {
            let v = VifCtl {
                vifi: i as u16,
                flags: VIFF_USE_IFINDEX,
                threshold: 1,
                rate_limit: 0,
                lcl_ifindex: crate::pktsock::ifindex(name)?,
                rmt_addr: 0,
            };
            set(
                MRT_ADD_VIF,
                &v as *const _ as *const libc::c_void,
                std::mem::size_of::<VifCtl>(),
            )?;
        }
        let routes = p.routes();
        for (s, g, oifs) in &routes {
            let mut ttls = [0u8; MAXVIFS];
            for &o in oifs {
                ttls[o] = 1;
            }
            let m = MfcCtl {
                origin: host_ip(*s),
                group: *g,
                parent: *s as u16,
                ttls,
                pkt_cnt: 0,
                byte_cnt: 0,
                wrong_if: 0,
                expire: 0,
            };
            set(
                MRT_ADD_MFC,
                &m as *const _ as *const libc::c_void,
                std::mem::size_of::<MfcCtl>(),
            )?;
        }
        Ok(KernelMroutes {
            _fd: fd,
            routes: routes.len(),
        })
    }
}
