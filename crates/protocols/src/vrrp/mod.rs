//! VRRP version 3 for IPv4 (RFC 5798) on routed ports and VLAN
//! interfaces (docs/vrrp.md).
//!
//! [`machine`] is one virtual router's state machine (pure, on the
//! caller's clock). [`VrrpRunner`] is the `vrrp` thread: per interface
//! with groups, an `AF_PACKET` socket on the interface's TAP twin receives
//! the advertisements the workers punt there (IP protocol 112, a socket
//! filter keeps everything else out) and sends the thread's frames
//! (advertisements, gratuitous ARPs) out of the twin, which the punt
//! thread injects on the port (or, for a VLAN interface, into the VLAN) as
//! any frame the kernel sends. State changes go to
//! `tables::vrrp::VirtualRouters`: the layer-3 stage then routes frames to
//! the virtual MAC, and the punt thread answers ARP for the virtual
//! addresses with it.

pub mod machine;

use machine::{Action, Group, GroupConfig, State};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tables::vrrp::{VirtualAddress, VirtualRouters};
use wire::vrrp::{AdvertError, AdvertRepr};

/// Receive-side counters of one interface (before a group is found).
#[derive(Clone, Debug, Default)]
pub struct RxCounters {
    pub received: u64,
    pub bad: HashMap<&'static str, u64>,
    /// Valid advertisements for a VRID not configured here.
    pub unknown_vrid: u64,
}

/// Per-group counters.
#[derive(Clone, Debug, Default)]
pub struct GroupCounters {
    pub adverts_sent: u64,
    pub adverts_received: u64,
    pub priority_zero_sent: u64,
    pub priority_zero_received: u64,
    /// Advertisements whose address list differs from ours (accepted,
    /// RFC 5798 6.4.2 only asks to log it).
    pub address_mismatch: u64,
    pub gratuitous_arps: u64,
    pub send_errors: u64,
}

struct Iface {
    name: String,
    port: u16,
    /// `Some(vlan)` for a VLAN interface.
    vlan: Option<u16>,
    tap: String,
    ifindex: u32,
    sock: Option<OwnedFd>,
    own: Vec<Ipv4Addr>,
    groups: Vec<(Group, GroupCounters)>,
    rx: RxCounters,
}

/// The `vrrp` thread.
pub struct VrrpRunner {
    ifaces: Vec<Iface>,
    vr: Arc<VirtualRouters>,
    stop: Box<dyn Fn() -> bool + Send>,
    quit: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    /// What `show vrrp` prints (JSON).
    pub info: Arc<Mutex<Value>>,
    epoch: Instant,
    /// The MAC learner, for VLAN interfaces (see [`VrrpRunner::with_learner`]).
    learner: Option<(Arc<crate::learn::LearnerInbox>, Arc<datapath::Shared>)>,
}

/// Stops the thread cleanly: masters send priority 0 first.
#[derive(Clone)]
pub struct VrrpHandle {
    quit: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    pub info: Arc<Mutex<Value>>,
}

impl VrrpHandle {
    /// Asks the thread to resign every mastership (priority 0
    /// advertisements) and waits up to `wait` for it, then a moment for
    /// the punt thread to send those frames.
    pub fn shutdown(&self, wait: Duration) {
        self.quit.store(true, Ordering::Release);
        let t0 = Instant::now();
        while !self.done.load(Ordering::Acquire) && t0.elapsed() < wait {
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(30));
    }
}

/// The state machine's settings of a configured group on an interface
/// with addresses `own`; `None` without an IPv4 address to send from.
fn group_config(g: &config::vrrp::VrrpGroup, own: &[config::IpNet]) -> Option<GroupConfig> {
    let addresses: Vec<Ipv4Addr> = g
        .addresses
        .iter()
        .filter_map(|a| match a {
            IpAddr::V4(a) => Some(*a),
            IpAddr::V6(_) => None,
        })
        .collect();
    // The primary: the interface's IPv4 address in the subnet of the
    // first virtual address (else its first IPv4 address).
    let primary = own
        .iter()
        .filter(|n| n.addr.is_ipv4())
        .find(|n| {
            addresses
                .first()
                .is_some_and(|a| n.contains(IpAddr::V4(*a)))
        })
        .or_else(|| own.iter().find(|n| n.addr.is_ipv4()))
        .and_then(|n| match n.addr {
            IpAddr::V4(a) => Some(a),
            IpAddr::V6(_) => None,
        })?;
    Some(GroupConfig {
        vrid: g.vrid.min(255) as u8,
        priority: g.effective_priority(own),
        interval_cs: (g.advert_interval_ms / 10).clamp(1, 4095) as u16,
        preempt: g.preempt,
        accept: g.accept_mode || g.is_owner(own),
        addresses,
        primary,
    })
}

impl VrrpRunner {
    /// `None` when no interface has groups. `twins`: (port id, TAP name,
    /// TAP ifindex, router MAC) of the routed interfaces
    /// (`routing::router::Router`).
    pub fn new(
        cfg: &config::Config,
        twins: &[(u16, String, u32, [u8; 6])],
        vr: Arc<VirtualRouters>,
        stop: Box<dyn Fn() -> bool + Send>,
    ) -> Option<VrrpRunner> {
        let mut ifaces = Vec::new();
        for l3 in cfg.l3_interfaces() {
            if l3.vrrp.is_empty() {
                continue;
            }
            let Some((_, tap, ifindex, _)) = twins.iter().find(|t| t.0 == l3.port) else {
                tracing::warn!("vrrp: {}: no TAP twin, groups not started", l3.name);
                continue;
            };
            let groups: Vec<(Group, GroupCounters)> = l3
                .vrrp
                .iter()
                .filter_map(|g| group_config(g, l3.addresses))
                .map(|c| (Group::new(c), GroupCounters::default()))
                .collect();
            ifaces.push(Iface {
                name: l3.name.clone(),
                port: l3.port,
                vlan: l3.vlan,
                tap: tap.clone(),
                ifindex: *ifindex,
                sock: None,
                own: l3
                    .addresses
                    .iter()
                    .filter_map(|n| match n.addr {
                        IpAddr::V4(a) => Some(a),
                        IpAddr::V6(_) => None,
                    })
                    .collect(),
                groups,
                rx: RxCounters::default(),
            });
        }
        if ifaces.is_empty() {
            return None;
        }
        vr.set_router_macs(
            ifaces
                .iter()
                .filter_map(|i| twins.iter().find(|t| t.0 == i.port).map(|t| (i.port, t.3)))
                .collect(),
        );
        vr.set_addresses(
            ifaces
                .iter()
                .flat_map(|i| {
                    i.groups.iter().flat_map(move |(g, _)| {
                        g.cfg.addresses.iter().map(move |a| VirtualAddress {
                            port: i.port,
                            addr: *a,
                            vrid: g.cfg.vrid,
                        })
                    })
                })
                .collect(),
        );
        let r = VrrpRunner {
            ifaces,
            vr,
            stop,
            quit: Arc::new(AtomicBool::new(false)),
            done: Arc::new(AtomicBool::new(false)),
            info: Arc::new(Mutex::new(Value::Null)),
            epoch: Instant::now(),
            learner: None,
        };
        r.publish();
        Some(r)
    }

    /// On a VLAN interface, frames to the virtual MAC must be switched to
    /// the VLAN's port to the router, whose own frames are not learned:
    /// on becoming master the virtual MAC is learned there at once (a
    /// MAC move from the port towards the old master), so hosts' frames
    /// are neither flooded nor sent to the old master. When another node
    /// becomes master, its advertisements move the entry to the port
    /// towards it.
    pub fn with_learner(
        mut self,
        inbox: Arc<crate::learn::LearnerInbox>,
        shared: Arc<datapath::Shared>,
    ) -> VrrpRunner {
        self.learner = Some((inbox, shared));
        self
    }

    pub fn handle(&self) -> VrrpHandle {
        VrrpHandle {
            quit: self.quit.clone(),
            done: self.done.clone(),
            info: self.info.clone(),
        }
    }

    fn now(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The thread.
    pub fn run(mut self) {
        for i in &mut self.ifaces {
            // Never use a virtual address as the source of the kernel's
            // own ARP requests (hosts would learn the router MAC for it).
            let _ = routing::sysctl::set_if(&i.tap, "ipv4", "arp_announce", "2");
            match open_socket(i.ifindex) {
                Ok(s) => i.sock = Some(s),
                Err(e) => tracing::warn!("vrrp: {}: socket on {}: {e}", i.name, i.tap),
            }
        }
        let now = self.now();
        for k in 0..self.ifaces.len() {
            for g in 0..self.ifaces[k].groups.len() {
                let acts = self.ifaces[k].groups[g].0.startup(now);
                self.apply(k, g, State::Initialize, &acts);
            }
        }
        self.publish();
        let mut buf = vec![0u8; 2048];
        let mut last_publish = Instant::now();
        loop {
            if self.quit.load(Ordering::Acquire) || (self.stop)() {
                break;
            }
            let now = self.now();
            let next = self
                .ifaces
                .iter()
                .flat_map(|i| i.groups.iter().filter_map(|(g, _)| g.next_deadline()))
                .min()
                .unwrap_or(now + 100);
            let wait = next.saturating_sub(now).min(100) as i32;
            let mut fds: Vec<libc::pollfd> = self
                .ifaces
                .iter()
                .map(|i| libc::pollfd {
                    fd: i.sock.as_ref().map_or(-1, |s| s.as_raw_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: fds is a valid array of pollfd of the given length.
            unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
            let mut changed = false;
            for (k, fd) in fds.iter().enumerate() {
                if fd.revents & libc::POLLIN != 0 {
                    changed |= self.receive(k, &mut buf);
                }
            }
            let now = self.now();
            for k in 0..self.ifaces.len() {
                for g in 0..self.ifaces[k].groups.len() {
                    let before = self.ifaces[k].groups[g].0.state;
                    let acts = self.ifaces[k].groups[g].0.on_timer(now);
                    changed |= !acts.is_empty();
                    self.apply(k, g, before, &acts);
                }
            }
            if changed || last_publish.elapsed() >= Duration::from_millis(500) {
                self.publish();
                last_publish = Instant::now();
            }
        }
        // Shutdown (RFC 5798 6.4.3): priority 0 so a backup takes over
        // after Skew_Time.
        let now = self.now();
        for k in 0..self.ifaces.len() {
            for g in 0..self.ifaces[k].groups.len() {
                let before = self.ifaces[k].groups[g].0.state;
                let acts = self.ifaces[k].groups[g].0.shutdown(now);
                self.apply(k, g, before, &acts);
            }
        }
        self.publish();
        self.done.store(true, Ordering::Release);
    }

    /// Reads every pending frame of interface `k`; true if a state changed.
    fn receive(&mut self, k: usize, buf: &mut [u8]) -> bool {
        let mut changed = false;
        loop {
            let Some(fd) = self.ifaces[k].sock.as_ref().map(|s| s.as_raw_fd()) else {
                return changed;
            };
            // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buf and from are valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    fd,
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    (&mut from as *mut libc::sockaddr_ll).cast(),
                    &mut len,
                )
            };
            if n <= 0 {
                return changed;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            let frame = &buf[..n as usize];
            let now = self.now();
            let i = &mut self.ifaces[k];
            i.rx.received += 1;
            let a = match wire::vrrp::parse_frame(frame) {
                Ok(a) => a,
                Err(AdvertError::NotVrrp) => continue,
                Err(e) => {
                    *i.rx.bad.entry(e.name()).or_default() += 1;
                    continue;
                }
            };
            if i.own.contains(&a.src) {
                // Our own advertisement back (a loop in the LAN).
                *i.rx.bad.entry("own-address").or_default() += 1;
                continue;
            }
            let Some(g) = i.groups.iter().position(|(g, _)| g.cfg.vrid == a.vrid) else {
                i.rx.unknown_vrid += 1;
                continue;
            };
            let (grp, c) = &mut i.groups[g];
            c.adverts_received += 1;
            if a.priority == 0 {
                c.priority_zero_received += 1;
            }
            if !a.addresses().eq(grp.cfg.addresses.iter().copied()) {
                c.address_mismatch += 1;
            }
            let before = grp.state;
            let acts = grp.on_advert(now, a.src, a.priority, a.interval_cs);
            changed |= !acts.is_empty() || before != grp.state;
            self.apply(k, g, before, &acts);
        }
    }

    /// Carries out the actions of group `g` on interface `k`.
    fn apply(&mut self, k: usize, g: usize, before: State, acts: &[Action]) {
        let i = &mut self.ifaces[k];
        let (grp, c) = &mut i.groups[g];
        let vrid = grp.cfg.vrid;
        let mut frame = [0u8; 256];
        for a in acts {
            match *a {
                Action::Advertise { priority } => {
                    let r = AdvertRepr {
                        src: grp.cfg.primary,
                        vrid,
                        priority,
                        interval_cs: grp.cfg.interval_cs,
                        addresses: &grp.cfg.addresses,
                    };
                    let ok = r
                        .emit_frame(&mut frame)
                        .is_some_and(|n| send(i.sock.as_ref(), i.ifindex, &frame[..n]));
                    if ok {
                        c.adverts_sent += 1;
                        if priority == 0 {
                            c.priority_zero_sent += 1;
                        }
                    } else {
                        c.send_errors += 1;
                    }
                }
                Action::BecomeMaster => {
                    self.vr.set_master(i.port, vrid, true);

                    if grp.cfg.accept {
                        set_local(&i.tap, i.ifindex, &grp.cfg.addresses, &i.own, true);
                    }
                    let vmac = wire::vrrp::virtual_mac(vrid);
                    for addr in &grp.cfg.addresses {
                        let ok = wire::vrrp::gratuitous_arp(vmac, *addr, &mut frame)
                            .is_some_and(|n| send(i.sock.as_ref(), i.ifindex, &frame[..n]));
                        if ok {
                            c.gratuitous_arps += 1;
                        } else {
                            c.send_errors += 1;
                        }
                    }
                }
                Action::LeaveMaster => {
                    self.vr.set_master(i.port, vrid, false);
                    if grp.cfg.accept {
                        set_local(&i.tap, i.ifindex, &grp.cfg.addresses, &i.own, false);
                    }
                }
            }
        }
        // A master's VLAN interface holds its virtual MAC in the MAC
        // table, claimed again with every advertisement (its own frames
        // are not learned, so nothing else keeps the entry from ageing).
        let claims = acts.iter().any(|a| {
            matches!(a, Action::BecomeMaster)
                || matches!(a, Action::Advertise { priority } if *priority > 0)
        });
        if let (true, State::Master, Some(vlan), Some((inbox, shared))) =
            (claims, grp.state, i.vlan, &self.learner)
        {
            let key = tables::MacKey::new(vlan, wire::vrrp::virtual_mac(vrid));
            inbox.send(
                shared,
                crate::learn::LearnerRequest::Claim { key, port: i.port },
            );
        }
        if grp.state != before {
            tracing::info!(
                target: "vrrp",
                "vrrp: {} VRID {}: {} -> {} ({}), priority {}, master {}",
                i.name,
                vrid,
                before.name(),
                grp.state.name(),
                grp.last_reason.map_or("", |r| r.text()),
                grp.cfg.priority,
                grp.master.map_or_else(|| "-".to_string(), |m| m.to_string()),
            );
        }
    }

    fn publish(&self) {
        let now = self.now();
        let groups: Vec<Value> = self
            .ifaces
            .iter()
            .flat_map(|i| {
                i.groups.iter().map(move |(g, c)| {
                    json!({
                        "interface": i.name,
                        "vrid": g.cfg.vrid,
                        "state": g.state.name(),
                        "priority": g.cfg.priority,
                        "owner": g.cfg.priority == 255,
                        "preempt": g.cfg.preempt,
                        "accept-mode": g.cfg.accept,
                        "virtual-mac": fmt_mac(wire::vrrp::virtual_mac(g.cfg.vrid)),
                        "addresses": g.cfg.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                        "primary": g.cfg.primary.to_string(),
                        "master": g.master.map(|m| m.to_string()),
                        "advert-interval-ms": u64::from(g.cfg.interval_cs) * 10,
                        "master-advert-interval-ms": u64::from(g.master_adver_cs) * 10,
                        "master-down-interval-ms": g.master_down_interval_ms(),
                        "transitions": g.transitions,
                        "became-master": g.became_master,
                        "last-change": g.last_reason.map(|r| r.text()),
                        "in-state-ms": now.saturating_sub(g.since_ms),
                        "counters": {
                            "adverts-sent": c.adverts_sent,
                            "adverts-received": c.adverts_received,
                            "priority-zero-sent": c.priority_zero_sent,
                            "priority-zero-received": c.priority_zero_received,
                            "address-mismatch": c.address_mismatch,
                            "gratuitous-arps": c.gratuitous_arps,
                            "send-errors": c.send_errors,
                        },
                    })
                })
            })
            .collect();
        let interfaces: Vec<Value> = self
            .ifaces
            .iter()
            .map(|i| {
                let mut bad: Vec<(&&str, &u64)> = i.rx.bad.iter().collect();
                bad.sort();
                json!({
                    "interface": i.name,
                    "tap": i.tap,
                    "received": i.rx.received,
                    "unknown-vrid": i.rx.unknown_vrid,
                    "dropped": bad.into_iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect();
        *self.info.lock().unwrap_or_else(|e| e.into_inner()) =
            json!({"groups": groups, "interfaces": interfaces});
    }
}

fn fmt_mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Accept mode: the virtual addresses (not already the interface's) as
/// /32s on the TAP while master, so the kernel answers packets to them.
/// ARP requests for them never reach the kernel (the punt thread answers),
/// and `arp_announce=2` keeps them out of the kernel's own ARP requests.
fn set_local(tap: &str, ifindex: u32, addrs: &[Ipv4Addr], own: &[Ipv4Addr], on: bool) {
    let mut rtnl = match routing::kernel::Rtnl::open() {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!("vrrp: rtnetlink: {e}");
            return;
        }
    };
    for a in addrs.iter().filter(|a| !own.contains(a)) {
        let r = if on {
            rtnl.add_address(ifindex, IpAddr::V4(*a), 32)
        } else {
            rtnl.del_address(ifindex, IpAddr::V4(*a), 32)
        };
        if let Err(e) = r {
            if !(on && routing::kernel::is_exists(&e)) {
                tracing::debug!("vrrp: {a}/32 on {tap}: {e}");
            }
        }
    }
}

/// An `AF_PACKET` socket on the TAP `ifindex` that receives only IPv4
/// protocol 112 (a classic BPF filter).
fn open_socket(ifindex: u32) -> std::io::Result<OwnedFd> {
    let proto = (libc::ETH_P_IP as u16).to_be();
    // SAFETY: plain socket call.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            i32::from(proto),
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // ldb [23] (IPv4 protocol); jeq #112 → accept, else drop.
    let mut code = [
        libc::sock_filter {
            code: 0x30,
            jt: 0,
            jf: 0,
            k: 23,
        },
        libc::sock_filter {
            code: 0x15,
            jt: 0,
            jf: 1,
            k: u32::from(wire::vrrp::PROTOCOL),
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0xffff,
        },
        libc::sock_filter {
            code: 0x06,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_mut_ptr(),
    };
    // SAFETY: prog points to `code`, valid for the call.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = proto;
    sll.sll_ifindex = ifindex as i32;
    // SAFETY: sll is a valid sockaddr_ll.
    let r = unsafe {
        libc::bind(
            fd,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(sock)
}

/// Sends a whole Ethernet frame out of the TAP (the punt thread takes it
/// from there).
fn send(sock: Option<&OwnedFd>, ifindex: u32, frame: &[u8]) -> bool {
    let Some(s) = sock else { return false };
    // SAFETY: sockaddr_ll is plain data; all zeroes is a valid value.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_ifindex = ifindex as i32;
    sll.sll_halen = 6;
    sll.sll_addr[..6].copy_from_slice(&frame[..6]);
    // SAFETY: frame and sll are valid for the lengths given.
    let n = unsafe {
        libc::sendto(
            s.as_raw_fd(),
            frame.as_ptr().cast(),
            frame.len(),
            0,
            (&sll as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    n == frame.len() as isize
}
