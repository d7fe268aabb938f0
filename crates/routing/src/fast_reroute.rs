//! Fast reroute in the control plane: installs the configured facility
//! backups (`mpls.fast-reroute`) in the LFIB before any failure, keeps
//! their next hops resolved, and reports their state (docs/mpls.md,
//! "Fast reroute").
//!
//! Entry k guards its port with LFIB protection id k. The switch itself
//! is not done here: the port supervisor (`control::ports`) flips the
//! protection id in the link-event path, one store for everything that
//! leaves through the port.

use crate::fib::Fib;
use datapath::Shared;
use std::net::IpAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tables::mpls::{LabelStack, Lfib, Path};
use tables::{NeighborState, NextHop};

/// How often the bypass next hops are checked (and asked for when their
/// MAC is unknown, at most once a second each).
const CHECK_EVERY: Duration = Duration::from_millis(200);

/// One protected port as installed.
#[derive(Clone, Debug)]
pub struct Protected {
    pub protect: String,
    pub port: u16,
    pub pid: u32,
    pub backup_port: String,
    pub next_hop: IpAddr,
    pub labels: Vec<u32>,
    /// Next-hop id of the bypass (held for the switch's lifetime).
    pub hop: u32,
}

/// State of one protected port, for `show mpls fast-reroute`.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct FrrStatus {
    pub protect: String,
    pub backup_port: String,
    pub next_hop: IpAddr,
    pub labels: Vec<u32>,
    /// Installed in the LFIB (before any failure).
    pub installed: bool,
    /// `primary` or `backup` (the protected port is down).
    pub active: &'static str,
    /// The bypass next hop's MAC is known (ready to switch).
    pub backup_resolved: bool,
    /// Times the port went down and traffic switched to the bypass.
    pub switches: u64,
}

/// The configured fast-reroute entries.
pub struct FastReroute {
    pub entries: Vec<Protected>,
    lfib: Arc<Lfib>,
    shared: Arc<Shared>,
    poked: Mutex<Vec<Option<Instant>>>,
}

impl FastReroute {
    /// Installs every `mpls.fast-reroute` entry (a held next hop for the
    /// bypass, the port's guard in the LFIB) and starts the thread that
    /// keeps the bypass next hops resolved. `None` without entries.
    /// `routed_ports`: the default VRF's routed ports (name, port id).
    pub fn start(
        cfg: &config::Config,
        routed_ports: &[(String, u16)],
        fib: &Mutex<Fib>,
        shared: &Arc<Shared>,
        threads: &mut Vec<JoinHandle<()>>,
    ) -> Result<Option<Arc<FastReroute>>, String> {
        if cfg.mpls.fast_reroute.is_empty() {
            return Ok(None);
        }
        let mut f = fib.lock().unwrap_or_else(|e| e.into_inner());
        let lfib = f.lfib();
        let routed = |name: &str| {
            routed_ports
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| *p)
                .ok_or_else(|| format!("fast reroute: {name:?} is not a routed port"))
        };
        let mut entries = Vec::new();
        for (k, e) in cfg.mpls.fast_reroute.iter().enumerate() {
            let port = routed(&e.protect)?;
            let bport = routed(&e.backup.port)?;
            let hop = f
                .hold_hop(NextHop {
                    port: bport,
                    gateway: Some(e.backup.next_hop),
                })
                .map_err(|e| format!("fast reroute: bypass next hop: {e:?}"))?;
            let labels = LabelStack::new(&e.backup.labels)
                .map_err(|x| format!("fast reroute {}: labels: {x:?}", e.protect))?;
            lfib.set_facility_backup(
                port,
                k as u32,
                &Path {
                    next_hop: hop,
                    labels,
                },
            )
            .map_err(|x| format!("fast reroute {}: LFIB: {x:?}", e.protect))?;
            tracing::info!(
                "fast reroute: port {} protected by {} via {} labels {:?}",
                e.protect,
                e.backup.port,
                e.backup.next_hop,
                e.backup.labels
            );
            entries.push(Protected {
                protect: e.protect.clone(),
                port,
                pid: k as u32,
                backup_port: e.backup.port.clone(),
                next_hop: e.backup.next_hop,
                labels: e.backup.labels.clone(),
                hop,
            });
        }
        drop(f);
        let n = entries.len();
        let m = Arc::new(FastReroute {
            entries,
            lfib,
            shared: shared.clone(),
            poked: Mutex::new(vec![None; n]),
        });
        let t = m.clone();
        threads.push(
            std::thread::Builder::new()
                .name("fast-reroute".into())
                .spawn(move || {
                    while !t.shared.stop.load(Ordering::Relaxed) {
                        t.resolve_next_hops();
                        std::thread::sleep(CHECK_EVERY);
                    }
                })
                .map_err(|e| format!("spawn fast-reroute: {e}"))?,
        );
        Ok(Some(m))
    }

    fn resolved(&self, gw: IpAddr) -> bool {
        self.shared.l3.load().as_ref().is_some_and(|l3| {
            l3.neighbors
                .lookup(gw)
                .is_some_and(|n| n.state != NeighborState::Incomplete)
        })
    }

    /// A bypass must be ready before the failure: a bypass next hop
    /// whose MAC is unknown gets a datagram (discard port, at most once
    /// a second), so the kernel behind the TAP twin resolves it and the
    /// neighbour mirror brings the MAC to the data path.
    fn resolve_next_hops(&self) {
        let mut poked = self.poked.lock().unwrap_or_else(|e| e.into_inner());
        for (e, p) in self.entries.iter().zip(poked.iter_mut()) {
            if self.resolved(e.next_hop) || p.is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            {
                continue;
            }
            *p = Some(Instant::now());
            let any: IpAddr = if e.next_hop.is_ipv4() {
                std::net::Ipv4Addr::UNSPECIFIED.into()
            } else {
                std::net::Ipv6Addr::UNSPECIFIED.into()
            };
            if let Ok(s) = std::net::UdpSocket::bind((any, 0)) {
                let _ = s.send_to(&[0], (e.next_hop, 9));
            }
        }
    }

    /// Every entry's state.
    pub fn status(&self) -> Vec<FrrStatus> {
        self.entries
            .iter()
            .map(|e| FrrStatus {
                protect: e.protect.clone(),
                backup_port: e.backup_port.clone(),
                next_hop: e.next_hop,
                labels: e.labels.clone(),
                installed: self
                    .lfib
                    .facility_backup(e.port)
                    .is_some_and(|(pid, p)| pid == e.pid && p.next_hop == e.hop),
                active: if self.lfib.protection_down(e.pid) {
                    "backup"
                } else {
                    "primary"
                },
                backup_resolved: self.resolved(e.next_hop),
                switches: self.lfib.protection_switches(e.pid),
            })
            .collect()
    }
}
