//! The management API: JSON over a Unix socket, one request per line, one
//! response per line. Every `show` command reads it; nothing else reads the
//! switch's state, so the CLI, scripts and tests see the same numbers.
//!
//! Requests: `{"cmd":"show-interfaces"}`, `{"cmd":"show-vlans"}`,
//! `{"cmd":"show-mac","vlan":10}`, `{"cmd":"show-mac-count","vlan":10}`,
//! `{"cmd":"show-counters"}`, `{"cmd":"clear-mac","vlan":10}`,
//! `{"cmd":"show-version"}`. Responses: `{"ok":true,"data":...}` or
//! `{"ok":false,"error":"..."}`.

use crate::ports::PortStatus;
use config::{Config, PortMode};
use datapath::Shared;
use pipeline::counters::DROP_REASONS;
use pipeline::{DropReason, WorkerCounters};
use protocols::learn::{LearnerInbox, LearnerRequest, LearnerStats};
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Set by `lanyard restart` (this API): the daemon's run loop re-executes
/// the binary. Kept here so the API does not reach back into the daemon.
static RESTART: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Ask the running switch to restart its data plane (see `daemon::run`).
pub fn request_restart() {
    RESTART.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Whether a restart was asked for.
pub fn restart_requested() -> bool {
    RESTART.load(std::sync::atomic::Ordering::SeqCst)
}

/// What the API reads.
pub struct ApiState {
    /// The running configuration, and config apply / rollback / bypass.
    pub applier: Arc<crate::apply::Applier>,
    pub shared: Arc<Shared>,
    pub counters: Vec<Arc<WorkerCounters>>,
    pub ports: Arc<Mutex<Vec<PortStatus>>>,
    pub learner: Arc<LearnerInbox>,
    pub learn_stats: Arc<LearnerStats>,
    /// The layer-3 control plane, when there are routed ports.
    pub router: Option<Arc<routing::router::Router>>,
    /// The workers' mailboxes (flow cache dumps).
    pub mailboxes: Vec<Arc<datapath::Mailbox>>,
    /// Export counters as JSON, when flow export is on.
    pub flow_export: Option<Box<dyn Fn() -> Value + Send + Sync>>,
    /// Backup pairs and port channels.
    pub ha: Arc<protocols::ha::Ha>,
    /// IGMP/MLD snooping and multicast routes.
    pub mcast: Arc<protocols::mcast::Multicast>,
    /// Storm control and loop detection.
    pub guard: Arc<crate::guard::GuardHandle>,
    /// The event manager (started after the API state exists: it reads
    /// the switch through this API).
    pub events: std::sync::OnceLock<Arc<events::EventManager>>,
    /// The virtual-switch pair's state (`Null`: no `virtual-switch:`).
    pub vswitch: Arc<Mutex<Value>>,
    /// VRRP groups' published state (`Null` without groups).
    pub vrrp: Arc<Mutex<Value>>,
}

fn drops_json(f: impl Fn(usize) -> u64) -> Value {
    let mut m = Map::new();
    for r in DropReason::ALL {
        m.insert(r.name().into(), json!(f(r as usize)));
    }
    Value::Object(m)
}

impl ApiState {
    /// The running configuration.
    fn cfg(&self) -> Arc<Config> {
        self.applier.running()
    }

    fn sum(&self, f: impl Fn(&WorkerCounters) -> u64) -> u64 {
        self.counters.iter().map(|c| f(c)).sum()
    }

    fn port_vlan(&self, id: usize) -> Value {
        let p = &self.cfg().ports[id];
        match p.mode {
            PortMode::Trunk => json!(p.effective_native_vlan().and_then(|n| n.id())),
            _ => json!(p.effective_vlan()),
        }
    }

    /// `test cable-diagnostics PORT`: the PHY's cable test (the port's
    /// link drops while it runs), per pair status and fault distance.
    fn cable_diagnostics(&self, req: &Value) -> Result<Value, String> {
        let port = req
            .get("port")
            .and_then(Value::as_str)
            .ok_or("cable-diagnostics: which port?")?;
        if self.cfg().port_index(port).is_none() {
            return Err(format!("no port {port:?}"));
        }
        if let Some(t) = req.get("tdr") {
            return tdr(port, t);
        }
        let pairs =
            io::cable::test(port, Duration::from_secs(20)).map_err(|e| format!("{port}: {e}"))?;
        tracing::info!(
            "cable diagnostics on {port}: {} pairs reported",
            pairs.len()
        );
        let pairs: Vec<Value> = pairs
            .iter()
            .map(|p| {
                json!({
                    "pair": p.pair_name(),
                    "status": p.status.map(|s| s.as_str()),
                    "fault_distance_m": p.fault_cm.map(|cm| f64::from(cm) / 100.0),
                })
            })
            .collect();
        Ok(json!({"interface": port, "pairs": pairs}))
    }
}

/// `test cable-diagnostics PORT --tdr`: the PHY's raw TDR trace.
/// `t`: `{"from_m", "to_m", "step_m", "pair"}`, each optional.
fn tdr(port: &str, t: &Value) -> Result<Value, String> {
    let cm = |k: &str| -> Result<Option<u32>, String> {
        match t.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_f64()
                .filter(|m| m.is_finite() && *m >= 0.0 && *m <= 150.0)
                .map(|m| Some((m * 100.0).round() as u32))
                .ok_or_else(|| format!("TDR {k}: a distance in metres, 0 to 150")),
        }
    };
    let pair = match t.get("pair").and_then(Value::as_str) {
        None => None,
        Some(p) => match p.to_ascii_uppercase().as_str() {
            "A" => Some(0),
            "B" => Some(1),
            "C" => Some(2),
            "D" => Some(3),
            _ => return Err(format!("TDR pair {p:?}: A, B, C or D")),
        },
    };
    let cfg = io::cable::TdrConfig {
        first_cm: cm("from_m")?,
        last_cm: cm("to_m")?,
        step_cm: cm("step_m")?,
        pair,
    };
    cfg.check()?;
    let trace =
        io::cable::tdr(port, &cfg, Duration::from_secs(60)).map_err(|e| format!("{port}: {e}"))?;
    tracing::info!(
        "cable TDR on {port}: {} samples reported",
        trace.samples.len()
    );
    let m = |cm: u32| f64::from(cm) / 100.0;
    Ok(json!({
        "interface": port,
        "mode": "tdr",
        "pulse_mv": trace.pulse_mv,
        "steps_m": trace.steps.map(|(a, b, s)| json!({"from": m(a), "to": m(b), "step": m(s)})),
        "samples": trace.samples.iter().map(|s| json!({
            "pair": char::from(b'A' + s.pair.min(25)).to_string(),
            "distance_m": m(s.distance_cm),
            "mv": s.mv,
        })).collect::<Vec<_>>(),
    }))
}

impl ApiState {
    /// `show interfaces [PORTS] [up|down] [vlan N]`: `port` is a name or
    /// a selection (`sw1-48,sw100`, [`config::Config::select_ports`]),
    /// `state` keeps ports in that state, `vlan` ports whose access VLAN
    /// or trunk carries it.
    pub fn interfaces(
        &self,
        port: Option<&str>,
        state: Option<&str>,
        vlan: Option<u16>,
    ) -> Result<Value, String> {
        let cfg = self.cfg();
        let mut keep = match port {
            Some(p) => {
                let mut k = vec![false; cfg.ports.len()];
                for i in cfg.select_ports(p)? {
                    k[i] = true;
                }
                k
            }
            None => vec![true; cfg.ports.len()],
        };
        let selected = keep.clone();
        if let Some(v) = vlan {
            for (i, k) in keep.iter_mut().enumerate() {
                *k &= cfg.port_vlans(i).contains(v);
            }
        }
        let st = self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let rows: Vec<Value> = st
            .iter()
            .enumerate()
            .filter(|(id, s)| {
                keep.get(*id).copied().unwrap_or(false)
                    && state.is_none_or(|w| serde_json::to_value(s.state).ok() == Some(json!(w)))
            })
            .map(|(id, s)| {
                let p = &self.cfg().ports[id];
                let drops: u64 = (0..DROP_REASONS)
                    .map(|r| self.sum(|c| c.ports[id].drops[r].get()))
                    .sum();
                json!({
                    "name": s.name,
                    "id": id,
                    "mode": p.mode.as_str(),
                    "vlan": self.port_vlan(id),
                    "vlans": self.cfg().port_vlans(id).to_string(),
                    "tpid": p.effective_tpid().map(|t| format!("{:#06x}", t.value())),
                    "state": s.state,
                    "ifindex": s.ifindex,
                    "mtu": s.mtu,
                    "attaches": s.attaches,
                    "backend": s.backend,
                    "backend_mode": s.backend_mode,
                    "busy_poll_refused": s.busy_poll_refused,
                    "rx_ring": s.rings.0,
                    "tx_ring": s.rings.1,
                    "error": s.error,
                    "rx_frames": self.sum(|c| c.ports[id].rx_frames.get()),
                    "tx_frames": self.sum(|c| c.ports[id].tx_frames.get()),
                    "rx_bytes": self.sum(|c| c.ports[id].rx_bytes.get()),
                    "tx_bytes": self.sum(|c| c.ports[id].tx_bytes.get()),
                    "rx_multicast": self.sum(|c| c.ports[id].rx_multicast.get()),
                    "rx_broadcast": self.sum(|c| c.ports[id].rx_broadcast.get()),
                    "tx_multicast": self.sum(|c| c.ports[id].tx_multicast.get()),
                    "tx_broadcast": self.sum(|c| c.ports[id].tx_broadcast.get()),
                    "drops": drops,
                    "port_errors": self.shared.port_errors[id].load(Ordering::Relaxed),
                    // What the driver reports (ethtool), for IF-MIB's
                    // ifSpeed/ifHighSpeed; null when unknown or absent.
                    "speed_mbps": (s.state != crate::ports::PortState::Missing)
                        .then(|| io::link::speed_mbps(&s.name))
                        .flatten(),
                    // The interface's own address (IF-MIB ifPhysAddress);
                    // null when the interface is missing.
                    "mac": (s.state != crate::ports::PortState::Missing)
                        .then(|| io::link::mac(&s.name))
                        .flatten()
                        .map(config::show_mac),
                })
            })
            .collect();
        let mut rows = rows;
        // Routed subinterfaces: a row each after the ports, in the state
        // of their port, with their own counters.
        for sub in cfg.subinterfaces() {
            let parent = st.get(sub.port);
            let (id, tag) = (sub.id as usize, sub.sub.vlan);
            if !selected.get(sub.port).copied().unwrap_or(false) || vlan.is_some_and(|v| v != tag) {
                continue;
            }
            let pstate = parent.map(|p| p.state);
            if state.is_some_and(|w| serde_json::to_value(pstate).ok() != Some(json!(w))) {
                continue;
            }
            let drops: u64 = (0..DROP_REASONS)
                .map(|r| self.sum(|c| c.ports[id].drops[r].get()))
                .sum();
            rows.push(json!({
                "name": sub.name(),
                "id": id,
                "mode": "subinterface",
                "vlan": tag,
                "vlans": tag.to_string(),
                "parent": sub.parent.name,
                "state": pstate,
                "mtu": sub.sub.mtu.unwrap_or(sub.parent.effective_mtu().min(config::MAX_L3_MTU)),
                "vrf": cfg.vrfs.get(cfg.vrf_of_interface(&sub.name()).wrapping_sub(1)).map(|v| v.name.clone()),
                "rx_frames": self.sum(|c| c.ports[id].rx_frames.get()),
                "tx_frames": self.sum(|c| c.ports[id].tx_frames.get()),
                "rx_bytes": self.sum(|c| c.ports[id].rx_bytes.get()),
                "tx_bytes": self.sum(|c| c.ports[id].tx_bytes.get()),
                "drops": drops,
            }));
        }
        Ok(Value::Array(rows))
    }

    /// `show vlan [id N]`. A member port's `state` is the one `show
    /// interfaces` gives it (up, down, missing).
    pub fn vlans(&self, vlan: Option<u16>) -> Result<Value, String> {
        if let Some(v) = vlan {
            if !self.cfg().vlan_ids().contains(v) {
                return Err(format!("VLAN {v} is not configured"));
            }
        }
        let t = self.shared.tables.load();
        let st = self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let rows: Vec<Value> = self
            .cfg()
            .vlan_ids()
            .iter()
            .filter(|id| vlan.is_none_or(|v| v == *id))
            .filter_map(|id| self.cfg().vlan_settings(id))
            .map(|v| {
                let ports: Vec<Value> = t.l2.vlans[v.id as usize]
                    .members
                    .iter()
                    .map(|p| {
                        let pe = &t.l2.ports[p as usize];
                        let state = st.get(p as usize).map(|s| s.state);
                        json!({
                            "name": self.cfg().port_label(p),
                            "tagged": pe.encap(v.id) != tables::Encap::Untagged,
                            "up": pe.up,
                            "state": state,
                        })
                    })
                    .collect();
                json!({
                    "vlan": v.id,
                    "name": v.name,
                    "learning": v.learning,
                    "limit": v.mac_limit,
                    "macs": self.learn_stats.vlan_counts[v.id as usize].load(Ordering::Relaxed),
                    "ports": ports,
                })
            })
            .collect();
        Ok(Value::Array(rows))
    }

    /// `show mac address-table`: `vlan`, and in `req` optional filters
    /// `port` (a port name), `mac` (`aa:bb:..`) and `type`
    /// (`dynamic` / `static`).
    pub fn mac_table(&self, vlan: Option<u16>, req: &Value) -> Result<Value, String> {
        let port = match req.get("port").and_then(Value::as_str) {
            Some(p) => Some(
                self.cfg()
                    .port_index(p)
                    .ok_or_else(|| format!("no port {p:?}"))? as u16,
            ),
            None => None,
        };
        let mac = match req.get("mac").and_then(Value::as_str) {
            Some(m) => Some(
                m.parse::<config::MacAddr>()
                    .map_err(|_| format!("{m:?} is not a MAC address"))?
                    .0,
            ),
            None => None,
        };
        let want_static = match req.get("type").and_then(Value::as_str) {
            None => None,
            Some("static") => Some(true),
            Some("dynamic") => Some(false),
            Some(t) => return Err(format!("type {t:?}: expected dynamic or static")),
        };
        let t = self.shared.tables.load();
        let now = self.shared.now();
        let mut rows = Vec::new();
        t.mac.for_each(|k, e| {
            if vlan.is_none_or(|v| v == k.vlan())
                && port.is_none_or(|p| p == e.port)
                && mac.is_none_or(|m| m == k.mac())
                && want_static.is_none_or(|s| s == e.is_static)
            {
                rows.push((k, e));
            }
        });
        rows.sort_by_key(|(k, _)| (k.vlan(), k.mac()));
        let cfg = self.cfg();
        Ok(Value::Array(
            rows.into_iter()
                .map(|(k, e)| {
                    json!({
                        "vlan": k.vlan(),
                        "mac": config::show_mac(k.mac()),
                        "type": if e.is_static { "static" } else { "dynamic" },
                        "port": cfg.port_label(e.port),
                        "age": if e.is_static { Value::Null } else { json!(now.saturating_sub(e.seen)) },
                    })
                })
                .collect(),
        ))
    }

    /// `show version`.
    pub fn version(&self) -> Value {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .ok();
        json!({
            "version": env!("CARGO_PKG_VERSION"),
            "name": self.cfg().switch.name,
            "uptime": self.shared.now(),
            "kernel": kernel,
            "ports": self.cfg().ports.len(),
            "workers": self.counters.len(),
            "bypass": self.applier.bypass(),
        })
    }

    pub fn mac_count(&self, vlan: Option<u16>) -> Value {
        let t = self.shared.tables.load();
        let mut stat = vec![0u64; 4096];
        let mut dynm = vec![0u64; 4096];
        t.mac.for_each(|k, e| {
            if e.is_static {
                stat[k.vlan() as usize] += 1;
            } else {
                dynm[k.vlan() as usize] += 1;
            }
        });
        let ids: Vec<u16> = self
            .cfg()
            .vlan_ids()
            .iter()
            .filter(|id| vlan.is_none_or(|v| v == *id))
            .collect();
        let vlans: Vec<Value> = ids
            .iter()
            .map(|&id| {
                let limit = self.cfg().vlan_settings(id).and_then(|v| v.mac_limit);
                json!({"vlan": id, "count": dynm[id as usize] + stat[id as usize],
                       "dynamic": dynm[id as usize], "static": stat[id as usize], "limit": limit})
            })
            .collect();
        let d: u64 = ids.iter().map(|&i| dynm[i as usize]).sum();
        let s: u64 = ids.iter().map(|&i| stat[i as usize]).sum();
        json!({
            "total": d + s, "dynamic": d, "static": s,
            "capacity": t.mac.capacity(),
            "learned": self.learn_stats.learned.load(Ordering::Relaxed),
            "moves": self.learn_stats.moves.load(Ordering::Relaxed),
            "aged": self.learn_stats.aged.load(Ordering::Relaxed),
            "limit_refused": self.learn_stats.limit_refused.load(Ordering::Relaxed),
            "table_full": self.learn_stats.table_full.load(Ordering::Relaxed),
            "learn_queue_full": self.sum(|c| c.learn_queue_full.get()),
            "vlans": vlans,
        })
    }

    pub fn counters(&self) -> Value {
        let ports: Vec<Value> = self
            .cfg()
            .ports
            .iter()
            .enumerate()
            .map(|(id, p)| {
                json!({
                    "name": p.name,
                    "rx_frames": self.sum(|c| c.ports[id].rx_frames.get()),
                    "rx_bytes": self.sum(|c| c.ports[id].rx_bytes.get()),
                    "tx_frames": self.sum(|c| c.ports[id].tx_frames.get()),
                    "tx_bytes": self.sum(|c| c.ports[id].tx_bytes.get()),
                    "rx_flooded": self.sum(|c| c.ports[id].rx_flooded.get()),
                    "tx_flooded": self.sum(|c| c.ports[id].tx_flooded.get()),
                    "rx_multicast": self.sum(|c| c.ports[id].rx_multicast.get()),
                    "rx_broadcast": self.sum(|c| c.ports[id].rx_broadcast.get()),
                    "tx_multicast": self.sum(|c| c.ports[id].tx_multicast.get()),
                    "tx_broadcast": self.sum(|c| c.ports[id].tx_broadcast.get()),
                    "rx_csum_completed": self.sum(|c| c.ports[id].rx_csum_completed.get()),
                    "umem_moved": self.sum(|c| c.ports[id].umem_moved.get()),
                    "umem_away": self.sum(|c| c.ports[id].umem_away.get()),
                    "drops": drops_json(|r| self.sum(|c| c.ports[id].drops[r].get())),
                })
            })
            .collect();
        let vlans: Vec<Value> = self
            .cfg()
            .vlan_ids()
            .iter()
            .map(|id| {
                let v = id as usize;
                json!({
                    "vlan": id,
                    "rx_frames": self.sum(|c| c.vlans[v].rx_frames.get()),
                    "rx_bytes": self.sum(|c| c.vlans[v].rx_bytes.get()),
                    "tx_frames": self.sum(|c| c.vlans[v].tx_frames.get()),
                    "tx_bytes": self.sum(|c| c.vlans[v].tx_bytes.get()),
                    "flooded": self.sum(|c| c.vlans[v].flooded.get()),
                    "drops": drops_json(|r| self.sum(|c| c.vlans[v].drops[r].get())),
                })
            })
            .collect();
        json!({"ports": ports, "vlans": vlans,
               "batches": self.sum(|c| c.batches.get()),
               "rx_ring_parks": self.sum(|c| c.ring_parks.get()),
               "rx_rings_parked": self.sum(|c| c.ring_parks.get())
                   .saturating_sub(self.sum(|c| c.ring_wakes.get())),
               "learn_queue_full": self.sum(|c| c.learn_queue_full.get()),
               "l3": self.l3_counters()})
    }

    /// Layer-3 stage and control-plane counters (null without routed ports).
    fn l3_counters(&self) -> Value {
        let Some(r) = &self.router else {
            return Value::Null;
        };
        use pipeline::l3::{L3Drop, Punt};
        let mut drops = Map::new();
        for d in L3Drop::ALL {
            drops.insert(
                d.name().into(),
                json!(self.sum(|c| c.l3.drops[d as usize].get())),
            );
        }
        let mut punts = Map::new();
        for p in Punt::ALL {
            punts.insert(
                p.name().into(),
                json!(self.sum(|c| c.l3.punts[p as usize].get())),
            );
        }
        let icmp_names = [
            "time-exceeded",
            "unreachable",
            "frag-needed",
            "packet-too-big",
        ];
        let mut icmp = Map::new();
        for (k, n) in icmp_names.iter().enumerate() {
            icmp.insert((*n).into(), json!(self.sum(|c| c.l3.icmp[k].get())));
        }
        let st = &r.stats;
        let ld = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
        json!({
            "rx_frames": self.sum(|c| c.l3.rx_frames.get()),
            "forwarded": self.sum(|c| c.l3.forwarded.get()),
            "drops": drops,
            "punts": punts,
            "icmp_requested": icmp,
            "icmp_sent": self.sum(|c| c.l3.icmp_sent.get()),
            "icmp_suppressed": self.sum(|c| c.l3.icmp_suppressed.get()),
            "punted": self.sum(|c| c.l3.punted.get()),
            "punt_queue_full": self.sum(|c| c.l3.punt_queue_full.get()),
            "punted_to_kernel": ld(&st.punted_to_kernel),
            "punt_errors": ld(&st.punt_errors),
            "injected": ld(&st.injected),
            "inject_errors": ld(&st.inject_errors),
            "vrf_kernel": {
                "received": ld(&st.routed_from_kernel),
                "routed": self.sum(|c| c.l3.kernel_routed.get()),
                "no_route": self.sum(|c| c.l3.kernel_unrouted.get()),
            },
            "neighbor_updates": ld(&st.neighbor_updates),
            "neighbor_resyncs": ld(&st.neighbor_resyncs),
            "neighbor_table_full": ld(&st.neighbor_table_full),
            "managed_neighbors": {
                "supported": st.managed.supported.load(Ordering::Relaxed),
                "held": ld(&st.managed.held),
                "left_alone": ld(&st.managed.left_alone),
                "over_limit": ld(&st.managed.over_limit),
                "added": ld(&st.managed.added),
                "released": ld(&st.managed.released),
                "readded": ld(&st.managed.readded),
                "bridged": ld(&st.managed.bridged),
                "errors": ld(&st.managed.errors),
            },
        })
    }

    fn router(&self) -> Result<&routing::router::Router, String> {
        self.router
            .as_deref()
            .ok_or_else(|| "no routed ports are configured".to_string())
    }

    /// Routed interfaces with their TAPs and addresses.
    pub fn ip_interfaces(&self) -> Result<Value, String> {
        let r = self.router()?;
        let st = self.ports.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok(Value::Array(
            r.ports()
                .iter()
                .map(|p| {
                    let id = p.port as usize;
                    // A VLAN interface is up while a port of its VLAN is.
                    let state = match p.vlan {
                        None => st.get(id).map(|s| json!(s.state)).unwrap_or(Value::Null),
                        Some(v) => {
                            let up = self.cfg().ports.iter().enumerate().any(|(i, _)| {
                                self.cfg().port_vlans(i).contains(v)
                                    && st
                                        .get(i)
                                        .is_some_and(|s| s.state == crate::ports::PortState::Up)
                            });
                            json!(if up { "up" } else { "down" })
                        }
                    };
                    json!({
                        "name": p.name,
                        "state": state,
                        "tap": p.tap,
                        "mac": config::show_mac(p.mac),
                        "addresses": p.addresses.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
                        "link_local": format!("{}/64", routing::router::link_local(p.mac)),
                        "mtu": p.mtu,
                        "urpf": format!("{:?}", p.urpf).to_lowercase(),
                        "rx_frames": self.sum(|c| c.ports[id].rx_frames.get()),
                        "tx_frames": self.sum(|c| c.ports[id].tx_frames.get()),
                    })
                })
                .collect(),
        ))
    }

    /// `show vrf`: every VRF (the default one first) with its table id,
    /// route distinguisher, namespace, interfaces, routes and neighbours.
    pub fn vrfs(&self) -> Result<Value, String> {
        let r = self.router()?;
        let ports = r.ports();
        let ifaces = |k: usize| -> Vec<String> {
            ports
                .iter()
                .filter(|p| p.vrf == k)
                .map(|p| p.name.clone())
                .collect()
        };
        let entry = |name: &str,
                     table: u32,
                     rd: Option<&str>,
                     netns: Option<&str>,
                     k: usize,
                     fib: &std::sync::Mutex<routing::fib::Fib>,
                     neighbors: &tables::NeighborTable| {
            let (s, refused) = {
                let f = fib.lock().unwrap_or_else(|e| e.into_inner());
                (f.summary(), f.refused())
            };
            json!({"name": name, "table": table, "rd": rd, "namespace": netns,
                   "interfaces": ifaces(k),
                   "routes_v4": s.v4.installed, "routes_v6": s.v6.installed,
                   "max_routes": s.v4.max_routes,
                   "refused": refused,
                   "neighbors": neighbors.len()})
        };
        let mut out = vec![entry(
            "default",
            routing::frr::netlink::RT_TABLE_MAIN,
            None,
            None,
            0,
            &r.fib,
            &r.neighbors,
        )];
        for (k, v) in r.vrfs() {
            out.push(entry(
                &v.name,
                v.table,
                v.rd().as_deref(),
                Some(&v.netns),
                k,
                &v.fib,
                &v.neighbors,
            ));
        }
        Ok(Value::Array(out))
    }

    /// `show ip route` / `show ipv6 route`: `family` 4 or 6; `summary`;
    /// `prefix` an exact prefix or an address (longest match); `vrf` a
    /// VRF's table instead of the global one (the answer is then
    /// `{"vrf", "table", "routes"}`, or the summary with `vrf` set).
    pub fn ip_route(&self, req: &Value) -> Result<Value, String> {
        let r = self.router()?;
        let Some(name) = req.get("vrf").and_then(Value::as_str) else {
            return self.ip_route_in(req, &r.fib);
        };
        if name == "default" {
            return self.ip_route_in(req, &r.fib);
        }
        let v = r
            .vrfs()
            .into_iter()
            .map(|(_, v)| v)
            .find(|v| v.name == name)
            .ok_or_else(|| format!("unknown VRF {name:?}"))?;
        let mut ans = self.ip_route_in(req, &v.fib)?;
        if ans.is_array() {
            ans = json!({"vrf": v.name, "table": v.table, "routes": ans});
        } else {
            ans["vrf"] = json!(v.name);
        }
        Ok(ans)
    }

    fn ip_route_in(
        &self,
        req: &Value,
        fib: &std::sync::Mutex<routing::fib::Fib>,
    ) -> Result<Value, String> {
        use routing::fib::Family;
        let r = self.router()?;
        let v6 = match req.get("family").and_then(Value::as_u64) {
            None | Some(4) => false,
            Some(6) => true,
            Some(f) => return Err(format!("bad family {f}: expected 4 or 6")),
        };
        let summary = req.get("summary").and_then(Value::as_bool) == Some(true);
        // How much of the lookup structure is on 2 MB pages: read from
        // /proc/self/smaps outside the FIB's lock (the route programmer
        // takes it).
        let huge = summary.then(|| {
            let f = fib.lock().unwrap_or_else(|e| e.into_inner());
            if v6 {
                let t = f.fib6();
                drop(f);
                t.huge_backed_bytes()
            } else {
                let t = f.fib4();
                drop(f);
                t.huge_backed_bytes()
            }
        });
        let fib = fib.lock().unwrap_or_else(|e| e.into_inner());
        if summary {
            let s = fib.summary();
            let fam = if v6 { &s.v6 } else { &s.v4 };
            let mut v = serde_json::to_value(fam).map_err(|e| e.to_string())?;
            v["lpm"]["huge_bytes"] = json!(huge.flatten());
            v["next_hops"] = json!(s.next_hops);
            v["next_hop_capacity"] = json!(s.next_hop_capacity);
            v["groups"] = json!(s.groups);
            v["group_capacity"] = json!(s.group_capacity);
            v["frr_objects"] = json!(s.frr_objects);
            v["counters"] = serde_json::to_value(s.counters).map_err(|e| e.to_string())?;
            v["fpm"] = match &r.fpm {
                Some(st) => {
                    let c = st.snapshot();
                    let mut f = serde_json::to_value(c).unwrap_or(Value::Null);
                    f["connected"] = json!(c.connections > c.disconnections);
                    f["address"] = json!(self.cfg().routing.fpm);
                    f
                }
                None => Value::Null,
            };
            return Ok(v);
        }
        let infos = match req.get("prefix").and_then(Value::as_str) {
            None => fib.routes(if v6 { Family::V6 } else { Family::V4 }),
            Some(p) => {
                let (addr, len) = match p.split_once('/') {
                    Some((a, l)) => (a, Some(l)),
                    None => (p, None),
                };
                let addr: std::net::IpAddr = addr
                    .parse()
                    .map_err(|_| format!("{p:?} is not an address"))?;
                if addr.is_ipv6() != v6 {
                    return Err(format!(
                        "{p} is not an IPv{} address",
                        if v6 { 6 } else { 4 }
                    ));
                }
                match len {
                    Some(l) => {
                        let l: u8 = l.parse().map_err(|_| format!("bad length in {p:?}"))?;
                        let pf = routing::frr::Prefix::new(addr, l)
                            .ok_or_else(|| format!("bad prefix {p:?}"))?;
                        fib.route(&pf)
                    }
                    None => fib.lookup(addr).into_iter().collect(),
                }
            }
        };
        drop(fib);
        let name = |port: u16| self.cfg().port_label(port);
        Ok(Value::Array(
            infos
                .into_iter()
                .map(|ri| {
                    let hops: Vec<Value> = ri
                        .hops
                        .iter()
                        .enumerate()
                        .map(|(k, h)| {
                            let mut v = json!({"interface": name(h.port),
                                   "gateway": h.gateway.map(|g| g.to_string()),
                                   "weight": h.weight});
                            if let Some(l) = ri.labels.get(k) {
                                v["labels"] = json!(l);
                            }
                            v
                        })
                        .collect();
                    let mut v = json!({
                        "prefix": ri.prefix.to_string(),
                        "source": ri.source.name(),
                        "installed": ri.installed,
                        "blackhole": ri.blackhole,
                        "unresolvable": ri.unresolvable,
                        "nexthops": hops,
                    });
                    if let Some(vpn) = ri.vpn {
                        v["vpn"] = json!({"remote_pe": vpn.remote_pe.to_string(),
                                          "label": vpn.label});
                    }
                    v
                })
                .collect(),
        ))
    }

    /// The neighbour table (ARP for `v6 == false`, ND otherwise).
    pub fn neighbors(&self, v6: bool) -> Result<Value, String> {
        let r = self.router()?;
        let now = self.shared.now();
        let mut rows = Vec::new();
        r.neighbors.for_each(|ip, n| {
            if ip.is_ipv6() == v6 {
                rows.push((ip, n));
            }
        });
        rows.sort_by_key(|(ip, _)| *ip);
        Ok(Value::Array(
            rows.into_iter()
                .map(|(ip, n)| {
                    json!({
                        "address": ip.to_string(),
                        "mac": config::show_mac(n.mac),
                        "interface": self.cfg().port_label(n.port),
                        "state": format!("{:?}", n.state).to_lowercase(),
                        "age": now.saturating_sub(n.confirmed),
                    })
                })
                .collect(),
        ))
    }

    /// `show flow cache [top N]`: every worker's cache, the largest flows.
    pub fn flow_cache(&self, req: &Value) -> Result<Value, String> {
        let Some(fe) = &self.cfg().flow_export else {
            return Err("flow export is not configured (flow-export: in the config)".into());
        };
        let n = match req.get("top") {
            None | Some(Value::Null) => 20,
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=10_000).contains(n))
                .ok_or("top: expected a number 1..10000")? as usize,
        };
        let mut dumps = Vec::new();
        for mb in &self.mailboxes {
            let (tx, rx) = mpsc::sync_channel(1);
            mb.send(datapath::PortCommand::DumpFlows { n, reply: tx });
            match rx.recv_timeout(Duration::from_secs(5)) {
                Ok(d) => dumps.push(d),
                Err(_) => return Err("a worker did not answer within 5 s".into()),
            }
        }
        let mut top: Vec<tables::flow::FlowRecord> =
            dumps.iter().flat_map(|d| d.top.iter().copied()).collect();
        top.sort_by_key(|r| std::cmp::Reverse(r.bytes));
        top.truncate(n);
        let name = |p: u16| {
            if p == u16::MAX {
                "flood".into()
            } else {
                self.cfg().port_label(p)
            }
        };
        let ip = |fam: u8, a: u128| -> String {
            if fam == 4 {
                std::net::Ipv4Addr::from(a as u32).to_string()
            } else {
                std::net::Ipv6Addr::from(a).to_string()
            }
        };
        let flows: Vec<Value> = top
            .iter()
            .map(|r| {
                let k = &r.key;
                json!({
                    "src": ip(k.family, k.src_ip), "dst": ip(k.family, k.dst_ip),
                    "proto": k.proto, "sport": k.src_port, "dport": k.dst_port,
                    "tos": k.tos, "in": name(k.in_port), "out": name(r.out_port),
                    "vlan": k.vlan, "packets": r.packets, "bytes": r.bytes,
                    "tcp-flags": r.tcp_flags,
                    "age-ms": r.last_ms.saturating_sub(r.first_ms),
                })
            })
            .collect();
        // One read of smaps for every worker's arrays (huge-bytes: null
        // when it cannot be read).
        let smaps = dumps
            .iter()
            .any(|d| !d.huge_ranges.is_empty())
            .then(|| std::fs::read_to_string("/proc/self/smaps").ok())
            .flatten();
        let workers: Vec<Value> = dumps
            .iter()
            .map(|d| {
                let huge = if d.huge_ranges.is_empty() {
                    Some(0)
                } else {
                    smaps.as_deref().map(|m| {
                        d.huge_ranges
                            .iter()
                            .map(|&(a, n)| tables::huge::anon_huge_in(m, a, n))
                            .sum::<usize>()
                    })
                };
                json!({"worker": d.worker, "flows": d.flows, "capacity": d.capacity,
                       "memory-bytes": d.memory_bytes, "huge-bytes": huge,
                       "cache-full": d.cache_full, "queued": d.queued})
            })
            .collect();
        let export = self.flow_export.as_ref().map(|f| f());
        Ok(json!({
            "collector": fe.collector,
            "version": match fe.version {
                config::services::FlowVersion::NetflowV9 => "netflow-v9",
                config::services::FlowVersion::Ipfix => "ipfix",
            },
            "active-timeout": fe.active_timeout, "inactive-timeout": fe.inactive_timeout,
            "sampling": fe.sampling,
            "flows": dumps.iter().map(|d| d.flows).sum::<usize>(),
            "workers": workers,
            "export": export,
            "top": flows,
        }))
    }

    /// `show control-plane`: policing per punt class.
    pub fn copp(&self) -> Value {
        let cfg = self.shared.copp.load();
        let classes: Vec<Value> = pipeline::copp::CoppClass::ALL
            .iter()
            .map(|c| {
                let k = *c as usize;
                let r = cfg.rates[k];
                json!({
                    "class": c.name(),
                    "rate": r.map(|r| r.pps),
                    "burst": r.map(|r| r.burst),
                    "passed": self.sum(|w| w.copp.passed[k].get()),
                    "dropped": self.sum(|w| w.copp.dropped[k].get()),
                })
            })
            .collect();
        json!({"enabled": cfg.rates.iter().any(Option::is_some), "classes": classes})
    }

    /// `show monitor`: mirror sessions with their destinations' counters.
    fn port_names(&self) -> Vec<String> {
        self.cfg().ports.iter().map(|p| p.name.clone()).collect()
    }

    pub fn monitor_sessions(&self) -> Value {
        let rows: Vec<Value> = self
            .cfg()
            .mirror_sessions
            .iter()
            .map(|m| {
                let d = self.cfg().port_index(&m.destination).unwrap_or(0);
                json!({
                    "name": m.name,
                    "sources": m.source_ports,
                    "vlans": m.source_vlans,
                    "direction": format!("{:?}", m.direction).to_lowercase(),
                    "destination": m.destination,
                    "tx_frames": self.sum(|c| c.ports[d].tx_frames.get()),
                    "tx_bytes": self.sum(|c| c.ports[d].tx_bytes.get()),
                    "drops": self.sum(|c| c.ports[d].drops[DropReason::TxRingFull as usize].get()
                        + c.ports[d].drops[DropReason::PortDown as usize].get()),
                })
            })
            .collect();
        Value::Array(rows)
    }

    pub fn clear_mac(&self, vlan: Option<u16>) -> Result<Value, String> {
        let (tx, rx) = mpsc::channel();
        self.learner
            .send(&self.shared, LearnerRequest::Clear { vlan, reply: tx });
        let n = rx
            .recv_timeout(Duration::from_secs(5))
            .map_err(|_| "the learner did not answer within 5 s".to_string())?;
        Ok(json!({"cleared": n}))
    }

    /// Answer one request.
    pub fn handle(&self, req: &Value) -> Value {
        let vlan = match req.get("vlan") {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n @ 1..=4094) => Some(n as u16),
                _ => {
                    return json!({"ok": false, "error": format!("bad vlan {v}: expected 1..4094")})
                }
            },
        };
        let r = match req.get("cmd").and_then(Value::as_str) {
            Some("show-interfaces") => self.interfaces(
                req.get("port").and_then(Value::as_str),
                req.get("state").and_then(Value::as_str),
                req.get("vlan").and_then(Value::as_u64).map(|v| v as u16),
            ),
            Some("show-vlans") => self.vlans(vlan),
            Some("show-mac") => self.mac_table(vlan, req),
            Some("show-mac-count") => Ok(self.mac_count(vlan)),
            Some("show-counters") => Ok(self.counters()),
            Some("show-version") => Ok(self.version()),
            Some("clear-mac") => self.clear_mac(vlan),
            Some("show-ip-interfaces") => self.ip_interfaces(),
            Some("show-arp") => self.neighbors(false),
            Some("show-ipv6-neighbors") => self.neighbors(true),
            Some("show-ip-route") => self.ip_route(req),
            Some("show-vrf") => self.vrfs(),
            Some("show-mpls-table") => self.mpls_table(),
            Some("show-mpls-forwarding") => self.mpls_forwarding(),
            Some("show-mpls-pseudowires") => self.mpls_pseudowires(),
            Some("show-mpls-fast-reroute") => self.mpls_fast_reroute(),
            Some("show-access-lists") => services::access_lists_json(
                &self.cfg(),
                self.shared.services.load().as_deref(),
                req.get("name").and_then(Value::as_str),
                req.get("all").and_then(Value::as_bool).unwrap_or(false),
            ),
            Some("show-access-lists-attached") => services::access_lists_attached_json(
                &self.cfg(),
                self.shared.services.load().as_deref(),
                req.get("interface").and_then(Value::as_str),
                req.get("vlan")
                    .and_then(Value::as_u64)
                    .and_then(|v| u16::try_from(v).ok()),
                req.get("all").and_then(Value::as_bool).unwrap_or(false),
            ),
            Some("show-policy-map-interface") => services::policy_maps_json(
                &self.cfg(),
                self.shared.services.load().as_deref(),
                req.get("port").and_then(Value::as_str),
            ),
            Some("show-flow-cache") => self.flow_cache(req),
            Some("show-storm-control") => Ok(self.guard.storm_json(&self.cfg(), &self.counters)),
            Some("show-loop-detect") => Ok(self.guard.loop_json(&self.cfg(), &self.counters)),
            Some("clear-errdisable") => self
                .guard
                .clear(&self.cfg(), req.get("port").and_then(Value::as_str)),
            Some("show-monitor") => Ok(self.monitor_sessions()),
            Some("show-event-manager") => match self.events.get() {
                Some(e) => Ok(e.json()),
                None => Ok(serde_json::json!({"policies": [], "history": []})),
            },
            Some("show-copp") => Ok(self.copp()),
            Some("config-diff") => match req.get("path").and_then(Value::as_str) {
                Some(p) => self.applier.diff_file(std::path::Path::new(p)),
                None => Err("config-diff needs \"path\"".into()),
            },
            Some("config-apply") => match req.get("path").and_then(Value::as_str) {
                Some(p) => self.applier.apply_file(std::path::Path::new(p)),
                None => Err("config-apply needs \"path\"".into()),
            },
            Some("config-rollback") => self.applier.rollback(),
            Some("bypass") => match req.get("on").and_then(Value::as_bool) {
                Some(on) => Ok(self.applier.set_bypass(on)),
                None => Ok(json!({"bypass": self.applier.bypass()})),
            },
            Some("cable-diagnostics") => self.cable_diagnostics(req),
            Some("restart") => {
                request_restart();
                Ok(json!({"restarting": true}))
            }
            Some("show-igmp-snooping") => Ok(self.mcast.show_groups(
                req.get("family").and_then(Value::as_u64) == Some(6),
                vlan,
                req.get("count").and_then(Value::as_bool).unwrap_or(false),
            )),
            Some("show-mroute") => Ok(self.mcast.show_mroute(
                req.get("family").and_then(Value::as_u64) == Some(6),
                req.get("summary").and_then(Value::as_bool).unwrap_or(false),
            )),
            Some("show-spanning-tree") => Ok(published(&self.ha.stp_info)),
            Some("show-virtual-switch") => Ok(published(&self.vswitch)),
            Some("show-vrrp") => Ok(published(&self.vrrp)),
            Some("show-backup-pairs") => Ok(self
                .ha
                .snapshot()
                .pairs_json(&self.port_names(), std::time::Instant::now())),
            Some("show-port-channel") => {
                let mut rows = self.ha.snapshot().channels_json(&self.port_names());
                let lacp = self
                    .ha
                    .lacp_info
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                for (r, info) in rows.iter_mut().zip(lacp) {
                    if let Some(ms) = r["members"].as_array_mut() {
                        for (m, i) in ms.iter_mut().zip(info) {
                            if let (Some(m), Value::Object(i)) = (m.as_object_mut(), i) {
                                m.extend(i);
                            }
                        }
                    }
                }
                Ok(Value::Array(rows))
            }
            Some("show-service-control")
                if req.get("history").and_then(Value::as_bool) == Some(true) =>
            {
                self.applier.inline().history()
            }
            Some("show-service-control") => self.applier.inline().show(
                req.get("applications")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            Some("show-subscriber") => match req.get("id").and_then(Value::as_str) {
                Some(id) => self.applier.inline().subscriber(id),
                None => Err("show-subscriber needs \"id\"".into()),
            },
            Some("subscriber-reset-usage") => match req.get("id").and_then(Value::as_str) {
                Some(id) => self.applier.inline().reset_usage(id),
                None => Err("subscriber-reset-usage needs \"id\"".into()),
            },
            Some("subscribers-load") => match req.get("path").and_then(Value::as_str) {
                // A file on the switch; a client's own stream goes through
                // `serve_one` (request line, then the records, then EOF).
                Some(path) => std::fs::File::open(path)
                    .map_err(|e| format!("{path}: {e}"))
                    .map(|f| {
                        self.applier
                            .inline()
                            .provision(BufReader::new(f), provision_mode(req))
                    }),
                None => Err("subscribers-load needs \"path\" or \"stream\": true".into()),
            },
            Some(other) => Err(format!("unknown command {other:?}")),
            None => Err("request has no \"cmd\"".into()),
        };
        match r {
            Ok(data) => json!({"ok": true, "data": data}),
            Err(e) => json!({"ok": false, "error": e}),
        }
    }
}

fn serve_one(state: &ApiState, stream: UnixStream) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut w = match stream.try_clone() {
        Ok(w) => w,
        Err(_) => return,
    };
    // Bytes, not a String: a request that is not UTF-8 still gets an answer.
    let mut line = Vec::new();
    let mut r = BufReader::new(stream.take_limit());
    if r.read_until(b'\n', &mut line).is_err() {
        return;
    }
    let resp = match serde_json::from_slice::<Value>(&line) {
        Ok(req)
            if req.get("cmd").and_then(Value::as_str) == Some("subscribers-load")
                && req.get("stream").and_then(Value::as_bool) == Some(true) =>
        {
            // Bulk provisioning: the records follow the request line until
            // the client closes its side (no 64 KiB limit, read as they
            // come; a stalled client times out after 5 s per read).
            let buffered = r.buffer().to_vec();
            let rest = r.into_inner().into_inner();
            let input = BufReader::new(std::io::Read::chain(std::io::Cursor::new(buffered), rest));
            let data = state
                .applier
                .inline()
                .provision(input, provision_mode(&req));
            json!({"ok": true, "data": data})
        }
        Ok(req) => state.handle(&req),
        Err(e) => json!({"ok": false, "error": format!("request is not JSON: {e}")}),
    };
    // One buffer, one write: formatting straight into the socket costs a
    // system call per JSON token (minutes for a 425,000-route table).
    let mut out = serde_json::to_vec(&resp).unwrap_or_default();
    out.push(b'\n');
    let _ = w.write_all(&out);
}

/// `"mode": "skip-errors"` applies the good records; default all or nothing.
fn provision_mode(req: &Value) -> dpi::provision::Mode {
    match req.get("mode").and_then(Value::as_str) {
        Some("skip-errors") => dpi::provision::Mode::SkipErrors,
        _ => dpi::provision::Mode::Atomic,
    }
}

/// Sends a streamed request: the request line, then everything `input`
/// yields, then end of stream; returns the answer's `data` (client side).
pub fn request_stream(
    path: &Path,
    req: &Value,
    input: &mut dyn std::io::Read,
) -> Result<Value, String> {
    let mut s = connect(path, Duration::from_secs(120))?;
    writeln!(s, "{req}").map_err(|e| format!("send: {e}"))?;
    std::io::copy(input, &mut s).map_err(|e| format!("send: {e}"))?;
    s.shutdown(std::net::Shutdown::Write)
        .map_err(|e| format!("send: {e}"))?;
    read_response(s)
}

/// The state a protocol thread last published for `show`, or
/// `{"enabled": false}` while it has published nothing (not configured).
fn published(state: &Mutex<Value>) -> Value {
    let v = state.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if v.is_null() {
        json!({"enabled": false})
    } else {
        v
    }
}

/// Connects to the switch's API socket, with a hint when nobody answers.
fn connect(path: &Path, read_timeout: Duration) -> Result<UnixStream, String> {
    let s = UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach the switch at {}: {e} (is `lanyard run` up? another switch: \
             --socket PATH or LANYARD_SOCKET=PATH)",
            path.display()
        )
    })?;
    let _ = s.set_read_timeout(Some(read_timeout));
    Ok(s)
}

/// Reads the switch's one-line answer: its `data` when `ok`, else its
/// `error` text.
fn read_response(s: UnixStream) -> Result<Value, String> {
    let mut line = String::new();
    BufReader::new(s)
        .read_line(&mut line)
        .map_err(|e| format!("receive: {e}"))?;
    let v: Value = serde_json::from_str(&line).map_err(|e| format!("bad response: {e}"))?;
    if v.get("ok") == Some(&Value::Bool(true)) {
        Ok(v.get("data").cloned().unwrap_or(Value::Null))
    } else {
        Err(v
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown error")
            .to_string())
    }
}

trait TakeLimit {
    fn take_limit(self) -> std::io::Take<UnixStream>;
}

#[path = "api_mpls.rs"]
mod mpls;

impl TakeLimit for UnixStream {
    /// Requests are small; a client cannot make the server buffer more.
    fn take_limit(self) -> std::io::Take<UnixStream> {
        std::io::Read::take(self, 64 * 1024)
    }
}

/// Bind the API socket (replacing a stale one) and serve until `stop`.
pub fn serve(path: &Path, state: Arc<ApiState>) -> std::io::Result<std::thread::JoinHandle<()>> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    if path.exists() {
        if UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("{} is in use by a running switch", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("api".into())
        .spawn(move || {
            while !state.shared.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = s.set_nonblocking(false);
                        let st = state.clone();
                        let _ = std::thread::Builder::new()
                            .name("api-conn".into())
                            .spawn(move || serve_one(&st, s));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(20)),
                }
            }
        })
}

/// Send one request to a switch and return its `data` (client side).
pub fn request(path: &Path, req: &Value) -> Result<Value, String> {
    let mut s = connect(path, Duration::from_secs(30))?;
    writeln!(s, "{req}").map_err(|e| format!("send: {e}"))?;
    read_response(s)
}
