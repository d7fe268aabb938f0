//! Requests to the kernel's routing netlink: interface addresses, routes of
//! the main table, interface indexes. One request at a time, each
//! acknowledged (`NLM_F_ACK`) and matched to its reply by sequence number.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::time::{Duration, Instant};

use super::nl::{self, NlMsgs, NlSocket, Recv};
use crate::frr::netlink::build::{rtmsg, Msg};
use crate::frr::netlink::{Prefix, AF_INET, AF_INET6, RTA_DST, RTA_GATEWAY, RTA_OIF, RTN_UNICAST};

pub use crate::frr::netlink::{RTM_DELROUTE, RTM_NEWROUTE};

// Message types (linux/rtnetlink.h).
pub const RTM_NEWLINK: u16 = 16;
pub const RTM_DELLINK: u16 = 17;
pub const RTM_GETLINK: u16 = 18;
pub const RTM_NEWADDR: u16 = 20;
pub const RTM_DELADDR: u16 = 21;

// Address attributes (linux/if_addr.h).
pub const IFA_ADDRESS: u16 = 1;
pub const IFA_LOCAL: u16 = 2;

/// Link attribute carrying the interface name.
pub const IFLA_IFNAME: u16 = 3;
/// `IFLA_NET_NS_FD`: move the link into the namespace of this descriptor.
pub const IFLA_NET_NS_FD: u16 = 28;
pub const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const NLA_F_NESTED: u16 = 1 << 15;
pub const RTM_NEWNSID: u16 = 88;
pub const NETNSA_NSID: u16 = 1;
pub const NETNSA_FD: u16 = 3;

/// `sizeof(struct ifaddrmsg)`.
pub const IFADDRMSG_LEN: usize = 8;
/// `sizeof(struct ifinfomsg)`.
pub const IFINFOMSG_LEN: usize = 16;

/// Main routing table (`RT_TABLE_MAIN`), as carried in `rtm_table`.
pub const RT_TABLE_MAIN: u8 = 254;

// Route scopes.
pub const RT_SCOPE_UNIVERSE: u8 = 0;
pub const RT_SCOPE_LINK: u8 = 253;
/// In a delete request: match a route of any scope.
pub const RT_SCOPE_NOWHERE: u8 = 255;

/// Longest interface name (`IFNAMSIZ` - 1).
const IFNAME_MAX: usize = 15;

/// How long a request waits for its acknowledgement by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// True when `err` says the object already exists (`EEXIST`): what
/// [`Rtnl::add_address`] returns for an address the interface already has.
pub fn is_exists(err: &io::Error) -> bool {
    err.raw_os_error() == Some(libc::EEXIST)
}

fn invalid(msg: &'static str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

fn family_of(a: &IpAddr) -> u8 {
    if a.is_ipv4() {
        AF_INET
    } else {
        AF_INET6
    }
}

/// A request socket on the kernel's routing netlink, in the network
/// namespace of the thread that opened it (it stays there whichever thread
/// uses it afterwards).
///
/// Every method sends one request and waits for the kernel's
/// acknowledgement; a refusal comes back as
/// `io::Error::from_raw_os_error(errno)` so callers can test
/// `raw_os_error()` (`EEXIST`, `ENODEV`, `ESRCH`, `EADDRNOTAVAIL`, ...).
/// Invalid arguments caught before asking the kernel are
/// `ErrorKind::InvalidInput`.
#[derive(Debug)]
pub struct Rtnl {
    sock: NlSocket,
    buf: Vec<u8>,
    seq: u32,
    timeout: Duration,
}

impl Rtnl {
    /// Opens a request socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Rtnl> {
        let sock = NlSocket::open()?;
        // Errors need not echo the whole request back; older kernels lack
        // the option, which only costs bytes.
        let _ = sock.set_opt(libc::SOL_NETLINK, libc::NETLINK_CAP_ACK, 1);
        Ok(Rtnl {
            sock,
            buf: vec![0; nl::RECV_BUF_LEN],
            seq: 0,
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// How long a request waits for its acknowledgement (`TimedOut` after).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// Adds `addr/prefix_len` to interface `ifindex`.
    ///
    /// Sent with `NLM_F_CREATE | NLM_F_EXCL` and no `NLM_F_REPLACE`: an
    /// address the interface already has (same address and prefix length)
    /// is an error with `raw_os_error() == Some(EEXIST)` (see
    /// [`is_exists`]), so a caller can tell "already there" from a failure
    /// and never silently rewrites an address someone else configured.
    /// IPv4 sets `IFA_LOCAL` and `IFA_ADDRESS` to `addr` (no peer); IPv6
    /// sets `IFA_ADDRESS`. The kernel adds the connected route itself.
    ///
    /// A new IPv6 address is tentative until the kernel's DAD work has run
    /// (briefly even with `accept_dad = 0`): until then it is not used as a
    /// source (`EADDRNOTAVAIL` for a socket sending from it) and does not
    /// answer neighbour solicitations.
    pub fn add_address(&mut self, ifindex: u32, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
        let msg = addr_msg(
            RTM_NEWADDR,
            nl::NLM_F_CREATE | nl::NLM_F_EXCL,
            ifindex,
            addr,
            prefix_len,
        )?;
        self.request(msg).map(|_| ())
    }

    /// Removes `addr/prefix_len` from interface `ifindex`
    /// (`EADDRNOTAVAIL` if it has no such address).
    pub fn del_address(&mut self, ifindex: u32, addr: IpAddr, prefix_len: u8) -> io::Result<()> {
        let msg = addr_msg(RTM_DELADDR, 0, ifindex, addr, prefix_len)?;
        self.request(msg).map(|_| ())
    }

    /// Installs or replaces the unicast route `prefix/len` in the main
    /// table (metric 0), via `gateway` and/or out of `oif`, tagged with
    /// `protocol` (`rtm_protocol`, e.g. 4 = static; pick a number of your
    /// own to recognise your routes in `ip route`). Host bits of `prefix`
    /// are cleared. Scope is universe with a gateway, link without.
    ///
    /// Replace semantics are the kernel's: the existing route with the same
    /// prefix, table and metric (whoever installed it) is overwritten.
    pub fn replace_route(
        &mut self,
        prefix: IpAddr,
        len: u8,
        gateway: Option<IpAddr>,
        oif: Option<u32>,
        protocol: u8,
    ) -> io::Result<()> {
        let p = Prefix::new(prefix, len).ok_or_else(|| invalid("prefix length too long"))?;
        let family = family_of(&p.addr);
        if gateway.is_some_and(|g| family_of(&g) != family) {
            return Err(invalid("gateway family differs from the prefix's"));
        }
        if gateway.is_none() && oif.is_none() {
            return Err(invalid("a route needs a gateway or an interface"));
        }
        let scope = if gateway.is_some() {
            RT_SCOPE_UNIVERSE
        } else {
            RT_SCOPE_LINK
        };
        let mut body = rtmsg(family, len, RT_TABLE_MAIN, protocol, RTN_UNICAST);
        body[6] = scope; // rtm_scope
        let mut m = Msg::new(RTM_NEWROUTE, nl::NLM_F_CREATE | nl::NLM_F_REPLACE, &body);
        if len > 0 {
            m = m.attr_addr(RTA_DST, p.addr);
        }
        if let Some(gw) = gateway {
            m = m.attr_addr(RTA_GATEWAY, gw);
        }
        if let Some(oif) = oif {
            m = m.attr_u32(RTA_OIF, oif);
        }
        self.request(m.finish()).map(|_| ())
    }

    /// Installs or replaces a default route (IPv4 or IPv6, by `gateway`'s
    /// family) via `gateway` out of interface `oif` with priority
    /// (metric) `metric`, `onlink`: the gateway need not be in a
    /// connected subnet (IPv4; an IPv6 link-local gateway is on-link
    /// anyway). Other default routes of other metrics stay.
    pub fn replace_default_via(
        &mut self,
        gateway: IpAddr,
        oif: u32,
        metric: u32,
        protocol: u8,
    ) -> io::Result<()> {
        const RTNH_F_ONLINK: u32 = 4;
        let family = family_of(&gateway);
        let mut body = rtmsg(family, 0, RT_TABLE_MAIN, protocol, RTN_UNICAST);
        body[6] = RT_SCOPE_UNIVERSE;
        if gateway.is_ipv4() {
            body[8..12].copy_from_slice(&RTNH_F_ONLINK.to_ne_bytes());
        }
        let m = Msg::new(RTM_NEWROUTE, nl::NLM_F_CREATE | nl::NLM_F_REPLACE, &body)
            .attr_addr(RTA_GATEWAY, gateway)
            .attr_u32(RTA_OIF, oif)
            .attr_u32(crate::frr::netlink::RTA_PRIORITY, metric);
        self.request(m.finish()).map(|_| ())
    }

    /// Removes the route `prefix/len` from the main table, whatever its
    /// protocol, scope or next hop (the first match, as `ip route del`
    /// does). `ESRCH` if there is none.
    pub fn del_route(&mut self, prefix: IpAddr, len: u8) -> io::Result<()> {
        let p = Prefix::new(prefix, len).ok_or_else(|| invalid("prefix length too long"))?;
        // Protocol 0 and type 0 match any; scope NOWHERE matches any scope.
        let mut body = rtmsg(family_of(&p.addr), len, RT_TABLE_MAIN, 0, 0);
        body[6] = RT_SCOPE_NOWHERE;
        let mut m = Msg::new(RTM_DELROUTE, 0, &body);
        if len > 0 {
            m = m.attr_addr(RTA_DST, p.addr);
        }
        self.request(m.finish()).map(|_| ())
    }

    /// Moves interface `ifindex` (in this socket's namespace) into the
    /// network namespace `ns_fd` (`RTM_NEWLINK` with `IFLA_NET_NS_FD`).
    /// It keeps its index there unless that index is taken.
    pub fn move_link(&mut self, ifindex: u32, ns_fd: i32) -> io::Result<()> {
        let mut ifi = [0u8; IFINFOMSG_LEN];
        ifi[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
        let msg = Msg::new(RTM_NEWLINK, 0, &ifi)
            .attr(IFLA_NET_NS_FD, &(ns_fd as u32).to_ne_bytes())
            .finish();
        self.request(msg).map(|_| ())
    }

    /// Creates a veth pair: `name` with index `index` here, and `peer`
    /// with index `peer_index` in namespace `peer_ns_fd` (what `ip link
    /// add NAME index I type veth peer name PEER index J netns NS` does).
    /// Both ends start down. `EEXIST` if a name or index is taken.
    pub fn add_veth(
        &mut self,
        name: &str,
        index: u32,
        peer: &str,
        peer_index: u32,
        peer_ns_fd: i32,
    ) -> io::Result<()> {
        let ifname = |n: &str| -> io::Result<Vec<u8>> {
            if n.is_empty() || n.len() > IFNAME_MAX || n.contains(['\0', '/']) {
                return Err(invalid("bad interface name"));
            }
            let mut v = n.as_bytes().to_vec();
            v.push(0);
            Ok(v)
        };
        let ifi = |index: u32| {
            let mut b = [0u8; IFINFOMSG_LEN];
            b[4..8].copy_from_slice(&(index as i32).to_ne_bytes());
            b
        };
        // VETH_INFO_PEER: an ifinfomsg followed by the peer's attributes.
        let mut peer_msg = ifi(peer_index).to_vec();
        peer_msg.extend(nla(IFLA_IFNAME, &ifname(peer)?));
        peer_msg.extend(nla(IFLA_NET_NS_FD, &(peer_ns_fd as u32).to_ne_bytes()));
        let data = nla(VETH_INFO_PEER | NLA_F_NESTED, &peer_msg);
        let mut info = nla(IFLA_INFO_KIND, b"veth\0");
        info.extend(nla(IFLA_INFO_DATA | NLA_F_NESTED, &data));
        let msg = Msg::new(RTM_NEWLINK, nl::NLM_F_CREATE | nl::NLM_F_EXCL, &ifi(index))
            .attr(IFLA_IFNAME, &ifname(name)?)
            .attr(IFLA_LINKINFO | NLA_F_NESTED, &info)
            .finish();
        self.request(msg).map(|_| ())
    }

    /// Deletes interface `ifindex` (a veth takes its peer with it).
    pub fn del_link(&mut self, ifindex: u32) -> io::Result<()> {
        let mut ifi = [0u8; IFINFOMSG_LEN];
        ifi[4..8].copy_from_slice(&(ifindex as i32).to_ne_bytes());
        self.request(Msg::new(RTM_DELLINK, 0, &ifi).finish())
            .map(|_| ())
    }

    /// Gives namespace `ns_fd` the id `nsid` as seen from this socket's
    /// namespace (`RTM_NEWNSID`, what `ip netns set NAME ID` does).
    /// `EEXIST` when the namespace already has an id here.
    pub fn set_nsid(&mut self, ns_fd: i32, nsid: u32) -> io::Result<()> {
        // struct rtgenmsg, padded to 4 bytes.
        let msg = Msg::new(RTM_NEWNSID, 0, &[libc::AF_UNSPEC as u8, 0, 0, 0])
            .attr(NETNSA_NSID, &(nsid as i32).to_ne_bytes())
            .attr(NETNSA_FD, &(ns_fd as u32).to_ne_bytes())
            .finish();
        self.request(msg).map(|_| ())
    }

    /// Installs or replaces the neighbour `ip` → `mac` on interface
    /// `ifindex` with `NUD_*` `state` and `NTF_*` `flags` (`RTM_NEWNEIGH`,
    /// `NLM_F_CREATE | NLM_F_REPLACE`). An entry installed for an external
    /// control plane is `NUD_NOARP` with `NTF_EXT_LEARNED`: the kernel
    /// neither ages nor probes it (what zebra does for EVPN neighbours).
    pub fn replace_neigh(
        &mut self,
        ifindex: u32,
        ip: IpAddr,
        mac: [u8; 6],
        state: u16,
        flags: u8,
    ) -> io::Result<()> {
        let nd = super::neigh::build::ndmsg(family_of(&ip), ifindex, state, flags);
        let msg = Msg::new(
            super::neigh::RTM_NEWNEIGH,
            nl::NLM_F_CREATE | nl::NLM_F_REPLACE,
            &nd,
        )
        .attr_addr(super::neigh::NDA_DST, ip)
        .attr(super::neigh::NDA_LLADDR, &mac)
        .finish();
        self.request(msg).map(|_| ())
    }

    /// Makes the neighbour `ip` of interface `ifindex` a managed entry
    /// (`NTF_MANAGED`, Linux >= 5.16): the kernel resolves it now, with no
    /// packet waiting, keeps re-confirming it and so never ages it out.
    ///
    /// The request carries no address and no state: for a managed update
    /// the kernel keeps an existing entry's state and address as they are
    /// (a resolved entry stays resolved) and only adds the flag. Being an
    /// admin update it also clears `NTF_EXT_LEARNED`, and it would take
    /// `NUD_PERMANENT` away: callers leave static (`PERMANENT`, `NOARP`)
    /// and externally learned entries alone. With `exclusive` the entry
    /// must not exist yet (`NLM_F_EXCL`: `EEXIST` if something installed
    /// it meanwhile), so a new entry can never overwrite someone else's.
    pub fn manage_neigh(&mut self, ifindex: u32, ip: IpAddr, exclusive: bool) -> io::Result<()> {
        use super::neigh::{NDA_DST, NDA_FLAGS_EXT, NTF_EXT_MANAGED, NUD_NONE, RTM_NEWNEIGH};
        let nd = super::neigh::build::ndmsg(family_of(&ip), ifindex, NUD_NONE, 0);
        let how = if exclusive {
            nl::NLM_F_EXCL
        } else {
            nl::NLM_F_REPLACE
        };
        let msg = Msg::new(RTM_NEWNEIGH, nl::NLM_F_CREATE | how, &nd)
            .attr_addr(NDA_DST, ip)
            .attr_u32(NDA_FLAGS_EXT, NTF_EXT_MANAGED)
            .finish();
        self.request(msg).map(|_| ())
    }

    /// Hands a managed neighbour back to the kernel's ordinary care: the
    /// flag goes, state and address stay (`NTF_USE` without
    /// `NTF_MANAGED`: counted as one use, then aged like any other).
    /// `ENOENT` if there is no such entry. Like
    /// [`manage_neigh`](Self::manage_neigh), not for static or externally
    /// learned entries.
    pub fn unmanage_neigh(&mut self, ifindex: u32, ip: IpAddr) -> io::Result<()> {
        use super::neigh::{NDA_DST, NTF_USE, NUD_NONE, RTM_NEWNEIGH};
        let nd = super::neigh::build::ndmsg(family_of(&ip), ifindex, NUD_NONE, NTF_USE);
        let msg = Msg::new(RTM_NEWNEIGH, nl::NLM_F_REPLACE, &nd)
            .attr_addr(NDA_DST, ip)
            .finish();
        self.request(msg).map(|_| ())
    }

    /// The kernel's entry for `ip` on interface `ifindex` (`None`: there
    /// is none).
    pub fn get_neigh(
        &mut self,
        ifindex: u32,
        ip: IpAddr,
    ) -> io::Result<Option<super::neigh::NeighborEvent>> {
        use super::neigh::{decode_neigh, NDA_DST, RTM_GETNEIGH};
        let nd = super::neigh::build::ndmsg(family_of(&ip), ifindex, 0, 0);
        let msg = Msg::new(RTM_GETNEIGH, 0, &nd)
            .attr_addr(NDA_DST, ip)
            .finish();
        let replies = match self.request(msg) {
            Ok(r) => r,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            Err(e) => return Err(e),
        };
        for r in replies {
            if let Ok(Some(ev)) = decode_neigh(&r) {
                if ev.ifindex == ifindex && ev.ip == ip {
                    return Ok(Some(ev));
                }
            }
        }
        Ok(None)
    }

    /// Removes the neighbour `ip` of interface `ifindex` (`ENOENT` if
    /// there is none).
    pub fn del_neigh(&mut self, ifindex: u32, ip: IpAddr) -> io::Result<()> {
        let nd = super::neigh::build::ndmsg(family_of(&ip), ifindex, 0, 0);
        let msg = Msg::new(super::neigh::RTM_DELNEIGH, 0, &nd)
            .attr_addr(super::neigh::NDA_DST, ip)
            .finish();
        self.request(msg).map(|_| ())
    }

    /// The index of interface `name` in this socket's namespace (`ENODEV`
    /// if there is none). Asked over netlink rather than with
    /// `if_nametoindex`, which would look in the calling thread's namespace.
    pub fn link_index(&mut self, name: &str) -> io::Result<u32> {
        if name.is_empty() || name.len() > IFNAME_MAX || name.contains(['\0', '/']) {
            return Err(invalid("bad interface name"));
        }
        let mut ifname = name.as_bytes().to_vec();
        ifname.push(0);
        let msg = Msg::new(RTM_GETLINK, 0, &[0u8; IFINFOMSG_LEN])
            .attr(IFLA_IFNAME, &ifname)
            .finish();
        for reply in self.request(msg)? {
            let body = reply
                .get(crate::frr::netlink::NLMSG_HDRLEN..)
                .unwrap_or(&[]);
            if nl::u16_at(&reply, 4) == Some(RTM_NEWLINK) && body.len() >= IFINFOMSG_LEN {
                if let Some(idx) = nl::u32_at(body, 4).filter(|&i| i != 0) {
                    return Ok(idx);
                }
            }
        }
        Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "RTM_GETLINK acknowledged without a link",
        ))
    }

    /// Sends `msg` (its type, flags and body already set) with a fresh
    /// sequence number and `NLM_F_REQUEST | NLM_F_ACK`, and returns the
    /// replies that preceded the acknowledgement.
    fn request(&mut self, mut msg: Vec<u8>) -> io::Result<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1).max(1);
        let seq = self.seq;
        nl::set_seq(&mut msg, seq);
        if let Some(f) = msg.get_mut(6..8) {
            let flags = u16::from_ne_bytes([f[0], f[1]]) | nl::NLM_F_REQUEST | nl::NLM_F_ACK;
            f.copy_from_slice(&flags.to_ne_bytes());
        }
        self.sock.send(&msg)?;

        let deadline = Instant::now() + self.timeout;
        let mut replies = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if !self.sock.wait(left)? {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "no netlink acknowledgement",
                ));
            }
            loop {
                let n = match self.sock.recv(&mut self.buf)? {
                    Recv::Empty => break,
                    Recv::Data(n) => n,
                    Recv::Truncated => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "netlink reply truncated",
                        ))
                    }
                };
                for m in NlMsgs::new(&self.buf[..n.min(self.buf.len())]) {
                    let m = m.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
                    // Left over from an earlier request that timed out.
                    if m.seq != seq {
                        continue;
                    }
                    match m.msg_type {
                        nl::NLMSG_ERROR => {
                            return match m.error_code() {
                                Some(0) => Ok(replies),
                                Some(code) if code < 0 => {
                                    Err(io::Error::from_raw_os_error(code.saturating_neg()))
                                }
                                _ => Err(io::Error::new(
                                    io::ErrorKind::InvalidData,
                                    "malformed netlink error message",
                                )),
                            }
                        }
                        nl::NLMSG_DONE => return Ok(replies),
                        _ => replies.push(m.bytes.to_vec()),
                    }
                }
            }
        }
    }
}

/// An `RTM_NEWADDR`/`RTM_DELADDR` request body and attributes.
fn addr_msg(
    msg_type: u16,
    flags: u16,
    ifindex: u32,
    addr: IpAddr,
    prefix_len: u8,
) -> io::Result<Vec<u8>> {
    let family = family_of(&addr);
    let max = if family == AF_INET { 32 } else { 128 };
    if prefix_len > max {
        return Err(invalid("prefix length too long"));
    }
    if ifindex == 0 {
        return Err(invalid("interface index 0"));
    }
    // struct ifaddrmsg { u8 family, prefixlen, flags, scope; u32 index; }
    let mut body = [0u8; IFADDRMSG_LEN];
    body[0] = family;
    body[1] = prefix_len;
    body[4..8].copy_from_slice(&ifindex.to_ne_bytes());
    let mut m = Msg::new(msg_type, flags, &body);
    if family == AF_INET {
        m = m.attr_addr(IFA_LOCAL, addr);
    }
    Ok(m.attr_addr(IFA_ADDRESS, addr).finish())
}

impl AsRawFd for Rtnl {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for Rtnl {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

/// One netlink attribute (header, payload, padding to 4 bytes), for
/// nesting inside another.
fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
    let len = 4 + payload.len();
    let mut v = Vec::with_capacity((len + 3) & !3);
    v.extend_from_slice(&(len as u16).to_ne_bytes());
    v.extend_from_slice(&ty.to_ne_bytes());
    v.extend_from_slice(payload);
    v.resize((len + 3) & !3, 0);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_messages() {
        let m = addr_msg(RTM_NEWADDR, 0, 5, "192.0.2.1".parse().unwrap(), 24).unwrap();
        // header + ifaddrmsg + two 8-byte attributes.
        assert_eq!(m.len(), 16 + 8 + 8 + 8);
        assert_eq!(&m[16..24], &[AF_INET, 24, 0, 0, 5, 0, 0, 0]);
        let m = addr_msg(RTM_NEWADDR, 0, 5, "2001:db8::1".parse().unwrap(), 64).unwrap();
        assert_eq!(m.len(), 16 + 8 + 20);
        assert!(addr_msg(RTM_NEWADDR, 0, 5, "192.0.2.1".parse().unwrap(), 33).is_err());
        assert!(addr_msg(RTM_NEWADDR, 0, 0, "192.0.2.1".parse().unwrap(), 24).is_err());
    }
}
