//! Hitless configuration change: `lanyard config diff|apply|rollback`,
//! bypass mode, and what a restart carries over (docs/ha.md).
//!
//! An apply validates the whole file, compiles every table it implies
//! (layer 2, services, mirrors, policing) *before* publishing any of them,
//! then publishes each with one pointer store: workers see the old tables
//! or the new ones, never a half-built one, and nothing on an unaffected
//! port is lost. The MAC table is kept. VRFs, the routed subinterfaces and
//! the VRFs' static routes change live through the router
//! (`Router::reconfigure`, docs/vrf.md "VRFs at run time"). What cannot
//! change under traffic (worker count, routed ports' own settings, FRR,
//! flow export, pairs/channels) is refused with the list of what needs
//! `lanyard restart`.

use arc_swap::ArcSwap;
use config::{self, Config, PortMode};
use datapath::Shared;
use pipeline::services::Services;
use protocols::ha::Ha;
use protocols::learn::{LearnerInbox, LearnerRequest};
use serde_json::{json, Value};
use std::sync::{mpsc, Arc, Mutex};
use tables::Tables;

/// What changed between two configurations.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// One line per change, `+`/`-`/`~` first.
    pub lines: Vec<String>,
    /// Changes that need a restart (empty: the change applies live).
    pub restart: Vec<String>,
    /// VRFs, subinterfaces or VRF static routes changed: the router
    /// applies them (`Router::reconfigure`).
    pub router: bool,
}

fn as_map(cfg: &Config) -> serde_json::Map<String, Value> {
    match serde_json::to_value(cfg) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    }
}

/// Sections that only a restart changes.
const RESTART_SECTIONS: &[&str] = &[
    "switch",
    "management",
    "routing",
    "mpls",
    "static-macs",
    "flow-export",
    "backup-pairs",
    "port-channels",
    "spanning-tree",
    // The pair's thread (peer link, channels, gateways, neighbour sync)
    // is set up from the start's configuration.
    "virtual-switch",
];

/// Compare `old` (running) and `new`.
pub fn diff(old: &Config, new: &Config) -> Diff {
    let mut d = Diff::default();
    let (a, b) = (as_map(old), as_map(new));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        let (x, y) = (a.get(k), b.get(k));
        if x == y {
            continue;
        }
        match k.as_str() {
            "ports" => diff_ports(old, new, &mut d),
            "vlans" => diff_vlans(old, new, &mut d),
            "pseudowires" => diff_pseudowires(old, new, &mut d),
            "vrfs" => diff_vrfs(old, new, &mut d),
            // The VRFs' static routes change with their VRFs; the default
            // VRF's and the rest of the section need a restart.
            "routing" if default_routing(old) == default_routing(new) => {
                d.lines.push("~ routing.static-routes (VRF routes)".into());
                d.router = true;
            }
            s => {
                d.lines.push(format!("~ {s}"));
                if RESTART_SECTIONS.contains(&s) {
                    d.restart.push(s.to_string());
                }
            }
        }
    }
    // The spanning tree thread knows its ports from the start.
    if old.spanning_tree.is_some()
        && old.stp_ports() != new.stp_ports()
        && !d.restart.iter().any(|r| r == "spanning-tree")
    {
        d.restart.push("spanning-tree ports".into());
    }
    diff_subinterfaces(old, new, &mut d);
    diff_pair_svis(old, new, &mut d);
    // The VRRP thread knows its groups from the start (docs/vrrp.md).
    let vrrp = |c: &Config| -> Vec<(String, Vec<config::vrrp::VrrpGroup>)> {
        c.l3_interfaces()
            .iter()
            .filter(|i| !i.vrrp.is_empty())
            .map(|i| (i.name.clone(), i.vrrp.to_vec()))
            .collect()
    };
    if vrrp(old) != vrrp(new) {
        d.restart.push("vrrp groups".into());
    }
    d
}

/// With a virtual-switch pair, a VLAN interface stays in its VRF until a
/// restart: the pair's neighbour sync follows each SVI in the kernel (the
/// VRF's namespace) it started in, so a moved SVI's neighbours, and a
/// moved gateway's answers taken for the peer, would stop crossing.
fn diff_pair_svis(old: &Config, new: &Config, d: &mut Diff) {
    let (Some(vs), Some(_)) = (&old.virtual_switch, &new.virtual_switch) else {
        return;
    };
    let vrf = |c: &Config, ifc: &str| match c.vrf_of_interface(ifc) {
        0 => "the default VRF".to_string(),
        k => c
            .vrfs
            .get(k - 1)
            .map_or_else(|| format!("VRF {k}"), |v| format!("VRF {}", v.name)),
    };
    for (v, _) in old.svis() {
        if new.vlan_config(v.id).is_none_or(|w| w.router.is_none()) {
            continue; // removed: `vlans` says so
        }
        let ifc = format!("vlan{}", v.id);
        let (from, to) = (vrf(old, &ifc), vrf(new, &ifc));
        if from != to {
            let what = match vs.gateways.iter().position(|g| *g == v.id) {
                Some(i) => format!("gateway {ifc} (virtual-switch.gateways[{i}])"),
                None => format!("SVI {ifc}"),
            };
            d.restart.push(format!(
                "vrfs: {what} would move from {from} to {to}: the virtual-switch pair follows \
                 its SVIs in the VRF they started in"
            ));
        }
    }
}

/// `routing:` without the VRFs' static routes.
fn default_routing(c: &Config) -> config::Routing {
    let mut r = c.routing.clone();
    r.static_routes.retain(|s| s.vrf.is_none());
    r
}

/// VRFs by name: added, removed, changed (members, RD). A VRF's table id
/// is its namespace's NSID and the FPM table zebra names its routes by,
/// and its namespace is where FRR sees it: neither changes under a
/// running VRF (delete the VRF and add it again, in two applies).
fn diff_vrfs(old: &Config, new: &Config, d: &mut Diff) {
    let find = |c: &Config, name: &str| c.vrfs.iter().position(|v| v.name == name);
    for (k, v) in old.vrfs.iter().enumerate() {
        let Some(j) = find(new, &v.name) else {
            d.lines.push(format!("- vrf {}", v.name));
            continue;
        };
        let w = &new.vrfs[j];
        let (t0, t1) = (v.table_id(k), w.table_id(j));
        if t0 != t1 {
            d.restart.push(format!(
                "vrfs: {} table would change from {t0} to {t1} (without `table:` it is 1001 + \
                 the VRF's position: give `table:`, or delete and re-add the VRF)",
                v.name
            ));
        } else if v.netns() != w.netns() {
            d.restart.push(format!(
                "vrfs: {} namespace would change from {} to {} (delete and re-add the VRF)",
                v.name,
                v.netns(),
                w.netns()
            ));
        } else if w != v {
            d.lines.push(format!("~ vrf {}", v.name));
        }
    }
    for v in &new.vrfs {
        if find(old, &v.name).is_none() {
            d.lines.push(format!("+ vrf {}", v.name));
        }
    }
    d.router = true;
}

/// Routed subinterfaces by name. Their port ids are positions (after the
/// ports, VLAN interfaces and port channels), and everything per port
/// (counters, ACLs, the layer-3 tables) is keyed by them: one that would
/// take another id needs a restart. Adding after the last one and
/// removing the last ones keep every other id.
fn diff_subinterfaces(old: &Config, new: &Config, d: &mut Diff) {
    let list = |c: &Config| -> Vec<(String, u16, config::SubinterfaceConfig)> {
        c.subinterfaces()
            .map(|s| (s.name(), s.id, s.sub.clone()))
            .collect()
    };
    let (a, b) = (list(old), list(new));
    for (name, id, sub) in &a {
        match b.iter().find(|x| &x.0 == name) {
            None => {
                d.lines.push(format!("- subinterface {name}"));
                d.router = true;
            }
            Some((_, id2, _)) if id2 != id => d.restart.push(format!(
                "subinterface {name} would move from port id {id} to {id2} \
                 (add subinterfaces after the last one, remove the last ones)"
            )),
            Some((_, _, sub2)) if sub2 != sub => {
                d.lines.push(format!("~ subinterface {name}"));
                d.router = true;
            }
            Some(_) => {}
        }
    }
    for (name, _, _) in &b {
        if !a.iter().any(|x| &x.0 == name) {
            d.lines.push(format!("+ subinterface {name}"));
            d.router = true;
        }
    }
}

fn diff_ports(old: &Config, new: &Config, d: &mut Diff) {
    for (i, p) in old.ports.iter().enumerate() {
        match new.port_index(&p.name) {
            None => {
                d.lines.push(format!("- port {}", p.name));
                if i >= new.ports.len() {
                    port_at_end(old, new, p, "removed", d);
                } else {
                    d.restart.push(format!(
                        "port {} removed before other ports (ports keep their position: remove from the end)",
                        p.name
                    ));
                }
            }
            Some(j) => {
                let q = &new.ports[j];
                if j != i {
                    d.lines.push(format!("~ port {} moved {i} -> {j}", p.name));
                    d.restart.push(format!("port {} moved", p.name));
                } else if p != q {
                    d.lines.push(format!("~ port {}", p.name));
                }
                // A routed port's interface is built at start; its access
                // lists and QoS policies are services, swapped live.
                let routed_change = || {
                    let bare = |x: &config::PortConfig| {
                        let mut x = x.clone();
                        x.acl_in.clear();
                        x.acl_out.clear();
                        x.policy_in = None;
                        x.policy_out = None;
                        // Its subinterfaces change live (diff_subinterfaces).
                        x.subinterfaces.clear();
                        x
                    };
                    bare(p) != bare(q)
                };
                if p != q
                    && (p.mode == PortMode::Routed || q.mode == PortMode::Routed)
                    && routed_change()
                {
                    d.restart.push(format!("routed port {} changed", p.name));
                } else if p.effective_mtu() != q.effective_mtu() {
                    d.restart.push(format!("port {} mtu", p.name));
                }
            }
        }
    }
    for (j, q) in new.ports.iter().enumerate() {
        if old.port_index(&q.name).is_none() {
            d.lines.push(format!("+ port {}", q.name));
            if j >= old.ports.len() {
                port_at_end(old, new, q, "added", d);
            } else {
                d.restart.push(format!(
                    "port {} added before other ports (add new ports at the end)",
                    q.name
                ));
            }
        }
    }
}

/// A port added at the end of `ports` or removed from it. The ids of
/// VLAN interfaces and port channels follow the ports (subinterfaces'
/// are checked by `diff_subinterfaces`), and the tables that name them
/// (the router MAC's static entry, learned addresses, the layer-3
/// interfaces) would point at the wrong port: with any of them, a
/// restart. Otherwise a routed port's twin comes or goes with the router
/// (`Router::reconfigure`), a switched port with the next snapshot.
fn port_at_end(old: &Config, new: &Config, port: &config::PortConfig, what: &str, d: &mut Diff) {
    let after = |c: &Config| c.svis().count() + c.port_channels.len();
    let kind = if port.mode == PortMode::Routed {
        "routed port"
    } else {
        "port"
    };
    if after(old) + after(new) > 0 {
        d.restart.push(format!(
            "{kind} {} {what}: the port ids of VLAN interfaces and port channels \
             would move",
            port.name
        ));
    } else if port.mode == PortMode::Routed {
        d.router = true;
    }
}

fn diff_vlans(old: &Config, new: &Config, d: &mut Diff) {
    for v in &old.vlans {
        match new.vlan_config(v.id) {
            None => {
                d.lines.push(format!("- vlan {}", v.id));
                if v.router.is_some() {
                    d.restart.push(format!("vlan {} interface removed", v.id));
                }
            }
            Some(w) if w != v => {
                d.lines.push(format!("~ vlan {}", v.id));
                if w.router != v.router {
                    d.restart.push(format!("vlan {} interface changed", v.id));
                }
            }
            Some(_) => {}
        }
    }
    for w in &new.vlans {
        if old.vlan_config(w.id).is_none() {
            d.lines.push(format!("+ vlan {}", w.id));
            if w.router.is_some() {
                d.restart.push(format!("vlan {} interface added", w.id));
            }
        }
    }
}

/// Pseudowires by name: added, removed, changed. All live (the
/// pseudowire manager needs the router, which any pseudowire's uplink
/// implies; a switch started without one needs a restart for its first
/// routed port anyway).
fn diff_pseudowires(old: &Config, new: &Config, d: &mut Diff) {
    let find = |c: &Config, name: &str| c.pseudowires.iter().position(|w| w.name == name);
    let before = d.lines.len();
    for w in &old.pseudowires {
        match find(new, &w.name) {
            None => d.lines.push(format!("- pseudowire {}", w.name)),
            Some(j) if new.pseudowires[j] != *w => d.lines.push(format!("~ pseudowire {}", w.name)),
            Some(_) => {}
        }
    }
    for w in &new.pseudowires {
        if find(old, &w.name).is_none() {
            d.lines.push(format!("+ pseudowire {}", w.name));
        }
    }
    if d.lines.len() == before && old.pseudowires != new.pseudowires {
        // Only the order changed: ids stay with the names.
        d.lines.push("~ pseudowires (order)".into());
    }
}

/// The running configuration and the means to change it.
pub struct Applier {
    running: ArcSwap<Config>,
    previous: Mutex<Option<Config>>,
    shared: Arc<Shared>,
    ha: Arc<Ha>,
    learner: Arc<LearnerInbox>,
    /// New port lists for the supervisor.
    ports: Mutex<mpsc::Sender<Config>>,
    workers: usize,
    /// Services set aside while in bypass mode.
    bypassed: Mutex<Option<Option<Arc<Services>>>>,
    /// One change at a time.
    lock: Mutex<()>,
    /// The multicast control plane (snooping settings, static routes).
    mcast: std::sync::OnceLock<Arc<protocols::mcast::Multicast>>,
    /// The socket given on the command line, which replaces every file's
    /// `management.socket` (so applying the same file is no change).
    socket_override: std::sync::OnceLock<std::path::PathBuf>,
    /// Inline service control (engines, subscribers).
    inline: Arc<crate::inline::InlineControl>,
    /// The pseudowire manager (with the router).
    pseudowires: std::sync::OnceLock<Arc<routing::pseudowire::PseudowireManager>>,
    /// The layer-3 control plane (VRFs, subinterfaces at run time).
    router: std::sync::OnceLock<Arc<routing::router::Router>>,
}

impl Applier {
    pub fn new(
        cfg: Config,
        shared: Arc<Shared>,
        ha: Arc<Ha>,
        learner: Arc<LearnerInbox>,
        ports: mpsc::Sender<Config>,
        workers: usize,
        inline: Arc<crate::inline::InlineControl>,
    ) -> Applier {
        Applier {
            running: ArcSwap::from_pointee(cfg),
            previous: Mutex::new(None),
            shared,
            ha,
            learner,
            ports: Mutex::new(ports),
            workers,
            bypassed: Mutex::new(None),
            lock: Mutex::new(()),
            mcast: std::sync::OnceLock::new(),
            socket_override: std::sync::OnceLock::new(),
            inline,
            pseudowires: std::sync::OnceLock::new(),
            router: std::sync::OnceLock::new(),
        }
    }

    /// Hand over the router (VRFs and subinterfaces change through it).
    pub fn set_router(&self, r: Arc<routing::router::Router>) {
        let _ = self.router.set(r);
    }

    /// Inline service control (for the API).
    pub fn inline(&self) -> &Arc<crate::inline::InlineControl> {
        &self.inline
    }

    /// The switch runs on `socket` whatever its files say (`--socket`).
    pub fn set_socket_override(&self, socket: std::path::PathBuf) {
        let _ = self.socket_override.set(socket);
    }

    /// Load a file to diff or apply, with the command line's overrides.
    fn load(&self, path: &std::path::Path) -> Result<Config, String> {
        let mut new = config::load(path).map_err(|e| e.to_string().trim_end().to_string())?;
        if let Some(s) = self.socket_override.get() {
            new.management.socket = s.clone();
        }
        Ok(new)
    }

    /// Hand over the pseudowire manager (started with the router).
    pub fn set_pseudowires(&self, m: Arc<routing::pseudowire::PseudowireManager>) {
        let _ = self.pseudowires.set(m);
    }

    /// Hand over the multicast control plane (created after the applier).
    pub fn set_multicast(&self, m: Arc<protocols::mcast::Multicast>) {
        let _ = self.mcast.set(m);
    }

    /// The running configuration.
    pub fn running(&self) -> Arc<Config> {
        self.running.load_full()
    }

    /// `config diff`: the changes from the running configuration.
    pub fn diff_file(&self, path: &std::path::Path) -> Result<Value, String> {
        let new = self.load(path)?;
        let d = diff(&self.running(), &new);
        Ok(json!({"changes": d.lines, "restart_required": d.restart, "live": d.restart.is_empty()}))
    }

    /// `config apply FILE`.
    pub fn apply_file(&self, path: &std::path::Path) -> Result<Value, String> {
        let new = self.load(path)?;
        self.apply(new)
    }

    /// `config rollback`: back to the configuration before the last apply.
    pub fn rollback(&self) -> Result<Value, String> {
        let prev = self
            .previous
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or("nothing to roll back to (no configuration was applied)")?;
        self.apply(prev)
    }

    /// Apply a validated configuration (see the module docs).
    pub fn apply(&self, new: Config) -> Result<Value, String> {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let old = self.running();
        let d = diff(&old, &new);
        if !d.restart.is_empty() {
            return Err(format!(
                "these changes need `lanyard restart`: {}",
                d.restart.join("; ")
            ));
        }
        if d.lines.is_empty() {
            return Ok(json!({"changes": [], "applied": true}));
        }
        let t0 = std::time::Instant::now();
        // Compile everything first: an error leaves the switch untouched.
        let l2 = config::build::l2_tables(&new);
        let services = if services::configured(&new) {
            Some(Arc::new(services::compile(&new, self.workers)?))
        } else {
            None
        };
        let mirrors = config::build::mirror_table(&new).map(Arc::new);
        let copp = Arc::new(new.control_plane_policing.to_config());
        let in_bypass = self
            .bypassed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some();
        let inline = self.inline.prepare(&new, in_bypass)?;
        // VRFs and subinterfaces: namespaces, twins and tables made (or
        // taken away) here; on a failure the router goes back to the
        // running configuration.
        let router = match (d.router, self.router.get()) {
            (false, _) => None,
            (true, None) => {
                return Err(
                    "VRFs and subinterfaces need the routed interfaces the switch \
                            was started with (it has none): `lanyard restart`"
                        .into(),
                )
            }
            (true, Some(r)) => match r.reconfigure(&new) {
                Ok(said) => {
                    tracing::info!("router: {}", said.join(", "));
                    Some(r)
                }
                Err(e) => {
                    if let Err(back) = r.reconfigure(&old) {
                        tracing::warn!("router: back to the running configuration: {back}");
                    }
                    return Err(format!("VRFs: {e}"));
                }
            },
        };
        // Last of the fallible steps: it may open the side channel.
        let pseudowires = if old.pseudowires != new.pseudowires {
            let m = self.pseudowires.get().ok_or_else(|| {
                "pseudowires need the routed uplink the switch was started with: `lanyard restart`"
                    .to_string()
            });
            match m.and_then(|m| Ok((m, m.prepare(&new)?))) {
                Ok(x) => Some(x),
                Err(e) => {
                    if let Some(r) = router {
                        let _ = r.reconfigure(&old);
                    }
                    return Err(e);
                }
            }
        } else {
            None
        };
        // Publish.
        self.ha
            .set_port_names(new.ports.iter().map(|p| p.name.clone()).collect());
        self.ha.replace_l2(l2, new.ports.len());
        {
            let mut b = self.bypassed.lock().unwrap_or_else(|e| e.into_inner());
            match b.as_mut() {
                // In bypass: the new services wait for bypass off.
                Some(saved) => *saved = services,
                None => self.shared.services.store(services),
            }
        }
        self.shared.mirrors.store(mirrors);
        self.shared.copp.store(copp);
        self.inline.commit(inline);
        // After the layer-2 tables: a port becoming a circuit has left its
        // VLANs, one leaving a circuit is back in them, and the circuits'
        // port state is the new tables'.
        if let Some((m, change)) = pseudowires {
            // The side channel's thread (when this change started it)
            // stops with the switch like the others.
            drop(m.commit(change));
        }
        if let Some(m) = self.mcast.get() {
            m.reconfigure(&new);
        }
        // Removed ports: their addresses go with them.
        for (i, p) in old.ports.iter().enumerate() {
            if new.port_index(&p.name).is_none() {
                self.learner
                    .send(&self.shared, LearnerRequest::FlushPort { port: i as u16 });
            }
        }
        if old
            .ports
            .iter()
            .map(|p| &p.name)
            .ne(new.ports.iter().map(|p| &p.name))
        {
            let _ = self
                .ports
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(new.clone());
        }
        tracing::info!(
            "configuration applied in {} us: {}",
            t0.elapsed().as_micros(),
            d.lines.join(", ")
        );
        *self.previous.lock().unwrap_or_else(|e| e.into_inner()) = Some((*old).clone());
        self.running.store(Arc::new(new));
        Ok(json!({"changes": d.lines, "applied": true, "us": t0.elapsed().as_micros() as u64}))
    }

    /// Bypass (wire) mode: forward without services (ACLs, QoS, flow
    /// accounting), entered and left with one pointer store each.
    pub fn set_bypass(&self, on: bool) -> Value {
        let _g = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut b = self.bypassed.lock().unwrap_or_else(|e| e.into_inner());
        match (on, b.is_some()) {
            (true, false) => {
                *b = Some(self.shared.services.swap(None));
                self.inline.set_bypass(true);
                tracing::info!("bypass on: forwarding without services");
            }
            (false, true) => {
                if let Some(s) = b.take() {
                    self.shared.services.store(s);
                }
                self.inline.set_bypass(false);
                tracing::info!("bypass off: services back");
            }
            _ => {}
        }
        json!({"bypass": b.is_some()})
    }

    pub fn bypass(&self) -> bool {
        self.bypassed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }
}

/// Where a restarting switch leaves its learned addresses for its
/// successor: next to the API socket.
pub fn mac_state_path(socket: &std::path::Path) -> std::path::PathBuf {
    socket.with_extension("macs")
}

/// Write the dynamic MAC entries (vlan, mac, port: 10 bytes each).
pub fn save_macs(t: &Tables, path: &std::path::Path) -> std::io::Result<usize> {
    let mut buf = Vec::with_capacity(t.mac.len() * 10);
    t.mac.for_each(|k, e| {
        if !e.is_static {
            buf.extend_from_slice(&k.vlan().to_be_bytes());
            buf.extend_from_slice(&k.mac());
            buf.extend_from_slice(&e.port.to_be_bytes());
        }
    });
    std::fs::write(path, &buf)?;
    Ok(buf.len() / 10)
}

/// Read what [`save_macs`] wrote (and remove the file).
pub fn load_macs(path: &std::path::Path) -> Vec<(tables::MacKey, u16)> {
    let Ok(b) = std::fs::read(path) else {
        return Vec::new();
    };
    let _ = std::fs::remove_file(path);
    b.chunks_exact(10)
        .map(|c| {
            let mut m = [0u8; 6];
            m.copy_from_slice(&c[2..8]);
            (
                tables::MacKey::new(u16::from_be_bytes([c[0], c[1]]), m),
                u16::from_be_bytes([c[8], c[9]]),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(s: &str) -> Config {
        config::parse(s, "t.yaml").unwrap()
    }

    #[test]
    fn live_and_restart_changes() {
        let a = cfg("vlans: [{id: 10}]\nports: [{name: a, vlan: 10}, {name: b}]\n");
        let b = cfg(
            "vlans: [{id: 10}, {id: 20}]\nports: [{name: a, vlan: 20}, {name: b}, {name: c}]\n",
        );
        let d = diff(&a, &b);
        assert!(d.restart.is_empty(), "{d:?}");
        assert_eq!(d.lines, vec!["~ port a", "+ port c", "+ vlan 20"]);
        // A port inserted in front moves the others: restart.
        let c = cfg("ports: [{name: z}, {name: a, vlan: 10}, {name: b}]\nvlans: [{id: 10}]\n");
        let d = diff(&a, &c);
        assert!(!d.restart.is_empty());
        // Removing the last port is live; the first is not.
        let e = cfg("vlans: [{id: 10}]\nports: [{name: a, vlan: 10}]\n");
        assert!(diff(&a, &e).restart.is_empty());
        let f = cfg("vlans: [{id: 10}]\nports: [{name: b}]\n");
        assert!(!diff(&a, &f).restart.is_empty());
        // Worker count: restart.
        let g = cfg(
            "switch: {workers: 2}\nvlans: [{id: 10}]\nports: [{name: a, vlan: 10}, {name: b}]\n",
        );
        assert_eq!(diff(&a, &g).restart, vec!["switch"]);
        assert!(diff(&a, &a).lines.is_empty());
    }

    /// A port added at the end or removed from it moves the port ids of
    /// VLAN interfaces and port channels, which follow the ports: with
    /// either, a restart, for switched ports as for routed ones. Before,
    /// a switched port was added live and the router MAC's static entry
    /// then named the new port (the VLAN interface unreachable).
    #[test]
    fn ports_at_the_end_keep_vlan_interfaces_and_channels_in_place() {
        let svi = "vlans: [{id: 10, router: {addresses: [10.0.10.1/24]}}]
";
        let a = cfg(&format!(
            "{svi}ports: [{{name: a, vlan: 10}}, {{name: b, vlan: 10}}]
"
        ));
        let b = cfg(&format!(
            "{svi}ports: [{{name: a, vlan: 10}}, {{name: b, vlan: 10}}, {{name: c, vlan: 10}}]
"
        ));
        let want = |what: &str| {
            vec![format!(
                "port c {what}: the port ids of VLAN interfaces and port channels would move"
            )]
        };
        assert_eq!(diff(&a, &b).restart, want("added"));
        assert_eq!(diff(&b, &a).restart, want("removed"));
        let po = "vlans: [{id: 10}]
port-channels: [{name: po1, members: [b]}]
";
        let c = cfg(&format!(
            "{po}ports: [{{name: a, vlan: 10}}, {{name: b, vlan: 10}}]
"
        ));
        let d = cfg(&format!(
            "{po}ports: [{{name: a, vlan: 10}}, {{name: b, vlan: 10}}, {{name: c, vlan: 10}}]
"
        ));
        assert_eq!(diff(&c, &d).restart, want("added"));
        // Without either, live (live_and_restart_changes above).
    }

    /// A routed port's access lists and QoS policies change live (the
    /// event manager polices a source that way); its addresses do not.
    #[test]
    fn routed_port_services_are_live() {
        let base = "access-lists: [{name: q, rules: [{action: permit}]}]\n\
                    class-maps: [{name: c, match: [{source: 192.0.2.1/32}]}]\n\
                    policy-maps: [{name: p, classes: [{class: c, police: {cir: 64k}}]}]\n";
        let a = cfg(&format!(
            "{base}ports: [{{name: r, mode: routed, addresses: [10.0.0.1/24]}}]\n"
        ));
        let b = cfg(&format!(
            "{base}ports: [{{name: r, mode: routed, addresses: [10.0.0.1/24], policy-in: p, acl-in: [q]}}]\n"
        ));
        let d = diff(&a, &b);
        assert!(d.restart.is_empty(), "{d:?}");
        assert_eq!(d.lines, vec!["~ port r"]);
        let c = cfg(&format!(
            "{base}ports: [{{name: r, mode: routed, addresses: [10.0.0.2/24], policy-in: p}}]\n"
        ));
        assert_eq!(diff(&b, &c).restart, vec!["routed port r changed"]);
    }

    /// VRFs added, removed or changed apply live through the router (they
    /// were refused with "needs a restart" before), with the VRFs' static
    /// routes and subinterfaces; a subinterface whose port id would move,
    /// and the default VRF's static routes, still need a restart.
    #[test]
    fn vrf_changes_are_live_subinterface_moves_are_not() {
        let ports = "ports: [{name: r, mode: routed, addresses: [10.0.0.1/24]}, \
                     {name: s, mode: routed, addresses: [10.0.0.1/24], subinterfaces: \
                     [{vlan: 10, addresses: [10.1.0.1/24]}]}]\n";
        let a = cfg(&format!(
            "{ports}vrfs: [{{name: A, interfaces: [r]}}, {{name: B, interfaces: [s]}}]\n"
        ));
        let b = cfg(&format!("{ports}vrfs: [{{name: A, interfaces: [r]}}]\n"));
        let c = cfg(&format!(
            "{ports}vrfs: [{{name: A, interfaces: [r]}}, {{name: B, interfaces: [s], rd: \"65000:2\"}}]\n"
        ));
        for (x, y, line) in [
            (&a, &b, "- vrf B"),
            (&b, &a, "+ vrf B"),
            (&a, &c, "~ vrf B"),
        ] {
            let d = diff(x, y);
            assert!(d.restart.is_empty(), "{d:?}");
            assert!(d.router);
            assert_eq!(d.lines, vec![line]);
        }
        // Deleting A would give B (no `table:`) A's table id: refused,
        // naming the key.
        let only_b = cfg(&format!("{ports}vrfs: [{{name: B, interfaces: [s]}}]\n"));
        let d = diff(&a, &only_b);
        assert!(
            d.restart
                .iter()
                .any(|r| r.starts_with("vrfs: B table would change from 1002 to 1001")),
            "{d:?}"
        );
        // A VRF with a new subinterface (after the last one) and a static
        // route of its own: live.
        let sub = |subs: &str, extra: &str| {
            cfg(&format!(
                "ports: [{{name: r, mode: routed, addresses: [10.0.0.1/24]}}, \
                 {{name: s, mode: routed, subinterfaces: [{subs}]}}]\n{extra}"
            ))
        };
        let one = sub("{vlan: 10, addresses: [10.1.0.1/24]}", "");
        let two = sub(
            "{vlan: 10, addresses: [10.1.0.1/24]}, {vlan: 20, addresses: [10.1.0.1/24]}",
            "vrfs: [{name: C, interfaces: [s.20]}]\nrouting: {static-routes: \
             [{prefix: 192.0.2.0/24, next-hop: 10.1.0.2, vrf: C}]}\n",
        );
        let d = diff(&one, &two);
        assert!(d.restart.is_empty(), "{d:?}");
        assert!(d.router);
        assert!(
            d.lines.contains(&"+ subinterface s.20".to_string()),
            "{d:?}"
        );
        assert!(diff(&two, &one).restart.is_empty());
        // One inserted before s.10 moves it: restart.
        let front = sub(
            "{vlan: 5, addresses: [10.5.0.1/24]}, {vlan: 10, addresses: [10.1.0.1/24]}",
            "",
        );
        let d = diff(&one, &front);
        assert_eq!(d.restart.len(), 1, "{d:?}");
        assert!(
            d.restart[0].starts_with("subinterface s.10 would move"),
            "{d:?}"
        );
        // The default VRF's static routes: restart, as before.
        let dflt = sub(
            "{vlan: 10, addresses: [10.1.0.1/24]}",
            "routing: {static-routes: [{prefix: 192.0.2.0/24, next-hop: 10.0.0.2}]}\n",
        );
        assert_eq!(diff(&one, &dflt).restart, vec!["routing"]);
        // A routed port added at the end in a new VRF, and removed again:
        // live. With a VLAN interface (its id follows the ports): restart.
        let p1 = cfg("ports: [{name: r, mode: routed, addresses: [10.0.0.1/24]}]\n");
        let p2 = cfg(
            "ports: [{name: r, mode: routed, addresses: [10.0.0.1/24]}, \
                      {name: u, mode: routed, addresses: [10.0.0.1/24]}]\n\
                      vrfs: [{name: D, interfaces: [u]}]\n",
        );
        for (x, y) in [(&p1, &p2), (&p2, &p1)] {
            let d = diff(x, y);
            assert!(d.restart.is_empty(), "{d:?}");
            assert!(d.router);
        }
        let svi = "vlans: [{id: 7, router: {addresses: [10.7.0.1/24]}}]\n";
        let q1 = cfg(&format!(
            "{svi}ports: [{{name: r, mode: routed, addresses: [10.0.0.1/24]}}, {{name: a, vlan: 7}}]\n"
        ));
        let q2 = cfg(&format!(
            "{svi}ports: [{{name: r, mode: routed, addresses: [10.0.0.1/24]}}, {{name: a, vlan: 7}}, \
             {{name: u, mode: routed}}]\n"
        ));
        let d = diff(&q1, &q2);
        assert!(
            d.restart.len() == 1 && d.restart[0].starts_with("routed port u added"),
            "{d:?}"
        );
    }

    /// A virtual-switch pair's SVI, gateway or not, moving to another VRF
    /// (a VRF added live with it) is refused naming the key: the pair's
    /// neighbour sync would still look for it in its old namespace. A
    /// changed `virtual-switch:` section (gateways added) needs a restart
    /// too: it was taken as live and changed nothing.
    #[test]
    fn pair_svis_stay_in_their_vrf_until_a_restart() {
        let base = "vlans: [{id: 10, router: {addresses: [10.0.10.1/24]}}, \
                    {id: 20, router: {addresses: [10.0.20.1/24]}}]\n\
                    ports: [{name: pl, mode: trunk}, \
                    {name: ka, mode: routed, addresses: [192.0.2.1/30]}]\n";
        let vs = |gw: &str| {
            format!(
                "virtual-switch: {{domain-id: 7, system-mac: 02:00:00:00:07:00, peer-link: [pl], \
                 keepalive: {{source: 192.0.2.1, peer: 192.0.2.2}}, gateways: [{gw}]}}\n"
            )
        };
        let start = cfg(&format!("{base}{}", vs("10")));
        let red = cfg(&format!(
            "{base}vrfs: [{{name: red, table: 1001, interfaces: [vlan10, vlan20]}}]\n{}",
            vs("10")
        ));
        let d = diff(&start, &red);
        assert_eq!(d.restart.len(), 2, "{d:?}");
        assert_eq!(
            d.restart[0],
            "vrfs: gateway vlan10 (virtual-switch.gateways[0]) would move from the default VRF \
             to VRF red: the virtual-switch pair follows its SVIs in the VRF they started in"
        );
        assert!(
            d.restart[1].starts_with("vrfs: SVI vlan20 would move from the default VRF to VRF red"),
            "{d:?}"
        );
        assert_eq!(diff(&red, &start).restart.len(), 2);
        // A VRF's other changes stay live with the pair.
        let red2 = cfg(&format!(
            "{base}vrfs: [{{name: red, table: 1001, interfaces: [vlan10, vlan20], rd: \"65000:2\"}}]\n{}",
            vs("10")
        ));
        let d = diff(&red, &red2);
        assert!(d.restart.is_empty(), "{d:?}");
        assert!(d.router);
        // Gateways changed: restart.
        let more = cfg(&format!("{base}{}", vs("10, 20")));
        assert_eq!(diff(&start, &more).restart, vec!["virtual-switch"]);
    }

    /// Pseudowires change live, one line per pseudowire by name.
    #[test]
    fn pseudowire_changes_are_live() {
        let base =
            "ports: [{name: up, mode: routed, addresses: [10.0.0.1/30]}, {name: a}, {name: b}]\n";
        let pw = |rest: &str| cfg(&format!("{base}pseudowires:\n{rest}"));
        let a = pw("  - {name: x, port: a, neighbor: 10.0.0.2, pw-id: 1}\n  - {name: y, port: b, neighbor: 10.0.0.2, pw-id: 2}\n");
        let b = pw("  - {name: y, port: b, vlan: 5, neighbor: 10.0.0.2, pw-id: 2}\n  - {name: z, port: a, neighbor: 10.0.0.2, pw-id: 3}\n");
        let d = diff(&a, &b);
        assert!(d.restart.is_empty(), "{d:?}");
        assert_eq!(
            d.lines,
            vec!["- pseudowire x", "~ pseudowire y", "+ pseudowire z"]
        );
        let c = pw("  - {name: y, port: b, neighbor: 10.0.0.2, pw-id: 2}\n  - {name: x, port: a, neighbor: 10.0.0.2, pw-id: 1}\n");
        assert_eq!(diff(&a, &c).lines, vec!["~ pseudowires (order)"]);
        assert_eq!(
            diff(&a, &cfg(base)).lines,
            vec!["- pseudowire x", "- pseudowire y"]
        );
    }

    #[test]
    fn mac_state_round_trip() {
        let t = config::build::initial_tables(&cfg("ports: [{name: a}, {name: b}]\n"));
        for i in 0..100u8 {
            t.mac.upsert(
                tables::MacKey::new(1, [2, 0, 0, 0, 0, i]),
                tables::MacEntry {
                    port: (i % 2) as u16,
                    is_static: false,
                    seen: 0,
                },
            );
        }
        let p = std::env::temp_dir().join(format!("ly-macs-{}", std::process::id()));
        assert_eq!(save_macs(&t, &p).unwrap(), 100);
        let mut back = load_macs(&p);
        back.sort_by_key(|(k, _)| k.0);
        assert_eq!(back.len(), 100);
        assert_eq!(back[7], (tables::MacKey::new(1, [2, 0, 0, 0, 0, 7]), 1));
        assert!(!p.exists());
    }
}
