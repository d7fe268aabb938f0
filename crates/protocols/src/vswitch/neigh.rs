//! ARP/ND neighbours of the SVIs over the peer link.
//!
//! The kernel resolves neighbours on the TAP twins of VLAN interfaces and
//! the `neighbors` thread mirrors them into the forwarding table
//! (docs/routing.md). This node follows the same kernel table with a
//! monitor of its own: what the kernel resolved here (`REACHABLE`,
//! `STALE`, `DELAY`, `PROBE`) goes to the peer bound to the SVI's VLAN.
//! The peer's entries are installed in this node's kernel on the SVI's
//! TAP as `NUD_NOARP` with `NTF_EXT_LEARNED` (as zebra installs EVPN
//! neighbours): neither aged nor probed, mirrored into the forwarding
//! table like any other, so this node routes to a host only the peer
//! resolved without sending ARP or ND itself.
//!
//! * An entry this node resolved itself wins over the peer's copy (it is
//!   not overwritten); the peer's is installed when this node's own goes.
//! * When the peer is lost for good, the peer's entries are handed to the
//!   kernel as `STALE`: it re-confirms them on use and ages them.
//! * SVIs of the default VRF and of VRFs take part: a VRF's TAP twins
//!   live in its namespace (docs/vrf.md), so a monitor and an rtnetlink
//!   socket are opened inside each VRF's namespace. A VLAN's SVI is in
//!   one VRF, so the entries need no VRF on the wire: the VLAN names it.
//!   Routed ports do not take part (see docs/virtual-switch.md).

use super::peer_set::PeerSet;
use routing::kernel::neigh::{NTF_EXT_LEARNED, NUD_NOARP, NUD_PERMANENT, NUD_STALE};
use routing::kernel::{NeighborMonitor, Rtnl};
use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};
use wire::vswitch::NeighEntry;

/// Neighbour-sync counters (`show virtual-switch`).
#[derive(Debug, Default, Clone)]
pub struct NeighCounters {
    /// Local changes sent / peer entries received (entries).
    pub tx: u64,
    pub rx: u64,
    /// Peer entries installed in / removed from the kernel.
    pub installed: u64,
    pub removed: u64,
    /// Kernel refusals, and entries for a VLAN without an SVI here.
    pub install_errors: u64,
    pub no_svi: u64,
}

/// One peer entry: its MAC and whether it is in the kernel (not when
/// this node resolved the address itself, or the SVI is missing).
#[derive(Clone, Copy, Debug)]
struct PeerNeigh {
    mac: [u8; 6],
    installed: bool,
}

/// An SVI whose neighbours are synchronised.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Svi {
    pub vlan: u16,
    /// Its TAP twin.
    pub tap: String,
    /// The namespace of its VRF (`None`: the default VRF, this process's).
    pub netns: Option<String>,
}

/// One kernel stack (the default VRF's, or a VRF's namespace): a monitor
/// and an rtnetlink socket opened inside it, and its SVIs' TAPs.
struct Stack {
    netns: Option<String>,
    mon: Option<NeighborMonitor>,
    rtnl: Option<Rtnl>,
    /// The last failure to open it (logged once).
    error: Option<String>,
    by_ifindex: HashMap<u32, u16>,
}

impl Stack {
    /// Opens the sockets (in the VRF's namespace for a VRF: the router
    /// creates it, so this is retried until it exists).
    fn open(&mut self) {
        if self.mon.is_some() {
            return;
        }
        let opened = match &self.netns {
            None => Ok((NeighborMonitor::open(), Rtnl::open())),
            Some(name) => std::fs::File::open(format!("/run/netns/{name}")).and_then(|ns| {
                routing::netns::run_in(&ns, || (NeighborMonitor::open(), Rtnl::open()))
            }),
        };
        let r = opened.and_then(|(m, r)| {
            let mut m = m?;
            m.request_dump()?;
            let mut r = r?;
            r.set_timeout(Duration::from_secs(1));
            Ok((m, r))
        });
        match r {
            Ok((m, r)) => {
                self.mon = Some(m);
                self.rtnl = Some(r);
                self.error = None;
            }
            Err(e) => {
                let e = e.to_string();
                if self.error.as_ref() != Some(&e) {
                    tracing::warn!(
                        "virtual-switch: neighbour sync in {}: {e}",
                        self.netns.as_deref().unwrap_or("the default namespace")
                    );
                }
                self.error = Some(e);
            }
        }
    }
}

pub struct NeighSync {
    /// The default VRF's stack first (if it has SVIs), then one per VRF.
    stacks: Vec<Stack>,
    /// Every synchronised SVI and the index of its stack.
    svis: Vec<(Svi, usize)>,
    /// VLAN → (stack, TAP ifindex).
    by_vlan: HashMap<u16, (usize, u32)>,
    next_resolve: Instant,
    /// What this node's kernel resolved, by (VLAN, address). A VLAN's SVI
    /// is in one VRF, so the VLAN names the stack too.
    local: HashMap<(u16, IpAddr), [u8; 6]>,
    /// Local changes not yet sent.
    pending: Vec<NeighEntry>,
    peer: PeerSet<(u16, IpAddr), PeerNeigh>,
    /// Some peer entry could not be installed: try again.
    retry: bool,
    pub counters: NeighCounters,
}

impl NeighSync {
    /// Without SVIs there is nothing to follow.
    pub fn new(svis: Vec<Svi>) -> NeighSync {
        let mut stacks: Vec<Stack> = Vec::new();
        let svis = svis
            .into_iter()
            .map(|svi| {
                let k = match stacks.iter().position(|s| s.netns == svi.netns) {
                    Some(k) => k,
                    None => {
                        stacks.push(Stack {
                            netns: svi.netns.clone(),
                            mon: None,
                            rtnl: None,
                            error: None,
                            by_ifindex: HashMap::new(),
                        });
                        stacks.len() - 1
                    }
                };
                (svi, k)
            })
            .collect();
        let mut s = NeighSync {
            stacks,
            svis,
            by_vlan: HashMap::new(),
            next_resolve: Instant::now(),
            local: HashMap::new(),
            pending: Vec::new(),
            peer: PeerSet::default(),
            retry: false,
            counters: NeighCounters::default(),
        };
        s.resolve(true);
        s
    }

    /// The monitors' descriptors, for the thread's poll.
    pub fn fds(&self) -> impl Iterator<Item = i32> + '_ {
        self.stacks
            .iter()
            .filter_map(|s| s.mon.as_ref().map(|m| m.as_raw_fd()))
    }

    /// Peer entries held.
    pub fn peer_len(&self) -> usize {
        self.peer.len()
    }

    /// Local entries known.
    pub fn local_len(&self) -> usize {
        self.local.len()
    }

    /// TAP indexes of the SVIs (again at most once a second, TAPs can be
    /// re-created by a configuration change), and stacks not open yet.
    fn resolve(&mut self, force: bool) {
        let now = Instant::now();
        if !force && now < self.next_resolve {
            return;
        }
        self.next_resolve = now + Duration::from_secs(1);
        self.by_vlan.clear();
        for (k, st) in self.stacks.iter_mut().enumerate() {
            st.open();
            st.by_ifindex.clear();
            let Some(r) = st.rtnl.as_mut() else {
                continue;
            };
            for (svi, _) in self.svis.iter().filter(|(_, s)| *s == k) {
                if let Ok(i) = r.link_index(&svi.tap) {
                    st.by_ifindex.insert(i, svi.vlan);
                    self.by_vlan.insert(svi.vlan, (k, i));
                }
            }
        }
    }

    /// Reads the kernels' changes; local ones are queued for the peer.
    pub fn poll_local(&mut self) {
        for k in 0..self.stacks.len() {
            self.poll_stack(k);
        }
    }

    fn poll_stack(&mut self, k: usize) {
        let Some(mon) = self.stacks[k].mon.as_mut() else {
            return;
        };
        let events = match mon.recv(Duration::ZERO) {
            Ok(ev) => ev,
            Err(e) => {
                if !routing::kernel::is_overrun(&e) {
                    tracing::warn!("virtual-switch: neighbour monitor: {e}");
                }
                let _ = mon.request_dump();
                return;
            }
        };
        for ev in events {
            let vlan = match self.stacks[k].by_ifindex.get(&ev.ifindex) {
                Some(v) => *v,
                None => {
                    self.resolve(false);
                    match self.stacks[k].by_ifindex.get(&ev.ifindex) {
                        Some(v) => *v,
                        None => continue,
                    }
                }
            };
            let key = (vlan, ev.ip);
            // Our own installs (NOARP) and configured entries (PERMANENT)
            // are not the kernel resolving anything.
            if !ev.deleted && ev.state & (NUD_NOARP | NUD_PERMANENT) != 0 {
                continue;
            }
            match (ev.usable(), ev.mac) {
                (true, Some(mac)) => {
                    if self.local.insert(key, mac) != Some(mac) {
                        self.pending.push(entry(key, mac, true));
                    }
                }
                _ => {
                    if ev.deleted && self.peer.get(&key).is_some_and(|p| p.installed) {
                        // Our install went (deleted by hand, TAP gone):
                        // put it back on the next retry.
                        if let Some(p) = self.peer.get_mut(&key) {
                            p.installed = false;
                        }
                        self.retry = true;
                    }
                    if let Some(mac) = self.local.remove(&key) {
                        self.pending.push(entry(key, mac, false));
                        // The peer still has it: its copy takes over.
                        if self.peer.get(&key).is_some() {
                            self.retry = true;
                        }
                    }
                }
            }
        }
    }

    /// Local changes to send (and forgets them).
    pub fn take_pending(&mut self) -> Vec<NeighEntry> {
        self.counters.tx += self.pending.len() as u64;
        std::mem::take(&mut self.pending)
    }

    /// Every local entry (a full copy).
    pub fn local_entries(&self) -> Vec<NeighEntry> {
        self.local
            .iter()
            .map(|(k, mac)| entry(*k, *mac, true))
            .collect()
    }

    /// One entry from the peer.
    pub fn apply(&mut self, e: &NeighEntry) {
        self.counters.rx += 1;
        let key = (e.vlan, e.ip);
        if e.add {
            let prev = self.peer.insert(
                key,
                PeerNeigh {
                    mac: e.mac,
                    installed: false,
                },
            );
            let was_installed = prev.is_some_and(|p| p.installed && p.mac == e.mac);
            if was_installed {
                if let Some(p) = self.peer.get_mut(&key) {
                    p.installed = true;
                }
            } else {
                self.install(key);
            }
        } else if let Some(p) = self.peer.remove(&key) {
            self.uninstall(key, p);
        }
    }

    pub fn sync_start(&mut self, generation: u32) {
        self.peer.sync_start(generation);
    }

    pub fn sync_end(&mut self, generation: u32) {
        let mut gone = Vec::new();
        self.peer.sync_end(generation, |k, p| gone.push((k, p)));
        for (k, p) in gone {
            self.uninstall(k, p);
        }
    }

    /// Installs the peer's entry for `key` unless this node resolved the
    /// address itself.
    fn install(&mut self, key: (u16, IpAddr)) {
        let Some(p) = self.peer.get(&key).copied() else {
            return;
        };
        if self.local.contains_key(&key) {
            return;
        }
        if !self.svis.iter().any(|(svi, _)| svi.vlan == key.0) {
            // No SVI of that VLAN here: nothing to install it on.
            self.counters.no_svi += 1;
            return;
        }
        let Some(&(k, ifindex)) = self.by_vlan.get(&key.0) else {
            self.resolve(false);
            if !self.by_vlan.contains_key(&key.0) {
                // The TAP is not there (yet): again next interval.
                self.retry = true;
                return;
            }
            return self.install(key);
        };
        let Some(r) = self.stacks[k].rtnl.as_mut() else {
            return;
        };
        match r.replace_neigh(ifindex, key.1, p.mac, NUD_NOARP, NTF_EXT_LEARNED) {
            Ok(()) => {
                self.counters.installed += 1;
                if let Some(p) = self.peer.get_mut(&key) {
                    p.installed = true;
                }
            }
            Err(e) => {
                self.counters.install_errors += 1;
                self.retry = true;
                tracing::debug!("virtual-switch: neighbour {} not installed: {e}", key.1);
            }
        }
    }

    fn uninstall(&mut self, key: (u16, IpAddr), p: PeerNeigh) {
        if !p.installed {
            return;
        }
        let Some(&(k, ifindex)) = self.by_vlan.get(&key.0) else {
            return;
        };
        let Some(r) = self.stacks[k].rtnl.as_mut() else {
            return;
        };
        match r.del_neigh(ifindex, key.1) {
            Ok(()) => self.counters.removed += 1,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => {}
            Err(_) => self.counters.install_errors += 1,
        }
    }

    /// Peer entries not in the kernel yet (SVI appeared, the kernel
    /// refused, this node's own entry went): tried again.
    pub fn retry(&mut self) {
        if !std::mem::take(&mut self.retry) {
            return;
        }
        let todo: Vec<(u16, IpAddr)> = self
            .peer
            .iter()
            .filter(|(k, p)| !p.installed && self.svis.iter().any(|(svi, _)| svi.vlan == k.0))
            .map(|(k, _)| *k)
            .collect();
        for k in todo {
            self.install(k);
        }
    }

    /// The peer is gone for good: its entries become the kernel's own
    /// (`STALE`: re-confirmed on use, aged when unused).
    pub fn peer_lost(&mut self) {
        let mut gone = Vec::new();
        self.peer.retain(|_, _| false, |k, p| gone.push((k, p)));
        for (key, p) in gone {
            if !p.installed {
                continue;
            }
            let Some(&(k, ifindex)) = self.by_vlan.get(&key.0) else {
                continue;
            };
            let Some(r) = self.stacks[k].rtnl.as_mut() else {
                continue;
            };
            if r.replace_neigh(ifindex, key.1, p.mac, NUD_STALE, 0)
                .is_err()
            {
                self.counters.install_errors += 1;
            }
        }
    }
}

fn entry(key: (u16, IpAddr), mac: [u8; 6], add: bool) -> NeighEntry {
    NeighEntry {
        ip: key.1,
        mac,
        vlan: key.0,
        add,
    }
}
