//! The FIB manager's label side: zebra's label entries (AF_MPLS over FPM)
//! into the LFIB's ILM, and labelled IP routes (FTN) into the LPMs as
//! labelled targets (docs/mpls.md).
//!
//! * A **label entry** becomes one ILM word. Paths pushing labels get an
//!   NHLFE each (next-hop id resolved like an IP route's gateway: the
//!   content-shared id of (port, gateway)); a path with no label (implicit
//!   null advertised downstream) is the plain next-hop id, i.e. PHP; several
//!   paths are an ECMP group of those members, each with its own stack. An
//!   entry whose paths all pop with no gateway (zebra's pop-and-lookup) is
//!   `PopLookup` in the global table, or in the VRF whose label interface
//!   the paths name (bgpd's per-VRF VPN label, docs/vrf.md).
//! * A **labelled route** is an ordinary FRR route slot whose spec keeps
//!   the labels ([`Spec::Labelled`]): precedence, resync, port refresh and
//!   withdrawal are those of every other FRR route; its target id is an
//!   NHLFE, a next hop, or a group mixing both.
//!
//! NHLFE ids are quarantined like next-hop ids ([`Fib::maintain`]), so a
//! worker that read an ILM word or LPM value just before a change never
//! follows it into a reused slot.

use super::*;
use labelfeed::{LabelMsg, LabelPath};
use tables::mpls::{
    IlmAction, LabelStack, Nhlfe, Path, PopAf, FIRST_UNRESERVED, IMPLICIT_NULL, MAX_LABEL,
};

/// What one labelled target holds, released together.
#[derive(Default)]
pub(super) struct LabelRes {
    hops: Vec<u32>,
    nhlfes: Vec<u32>,
    group: Option<u32>,
}

/// One label entry from zebra.
struct IlmEntry {
    protocol: u8,
    paths: Vec<LabelPath>,
    owned: Owned,
    pop: bool,
    gen: u32,
}

/// Counters of the label side (monotonic).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MplsFibCounters {
    /// Label entries installed or replaced.
    pub label_adds: u64,
    /// Label entries withdrawn.
    pub label_dels: u64,
    /// Labelled route updates (FTN).
    pub ftn_updates: u64,
    /// Refused: reserved or out-of-range in-label, or more labels than one
    /// push takes.
    pub bad_label: u64,
    /// Refused: no NHLFE slot left.
    pub nhlfe_full: u64,
    /// Label entries with no usable path (interface not a port of ours):
    /// not installed until the ports change.
    pub unresolvable: u64,
    /// Label entries removed by a resync sweep.
    pub swept: u64,
    /// Label entries from zebra for a label the configuration holds (a
    /// VRF's static VPN label): not installed, the configuration's wins.
    pub static_held: u64,
}

#[derive(Default)]
pub(super) struct LabelState {
    ilm: BTreeMap<u32, IlmEntry>,
    pub(super) counters: MplsFibCounters,
    /// VRF label interfaces: ifindex → VRF (1-based, the data plane's
    /// index). A pop entry toward one pops into that VRF (docs/vrf.md).
    vrf_label: HashMap<u32, u16>,
    /// The VRFs' static VPN labels (`vrfs[].vpn-label`): label → VRF
    /// (1-based), popped into it (docs/vrf.md, "Static VPN routes").
    statics: BTreeMap<u32, u16>,
}

/// One way out of a label entry or labelled route, as installed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LabelHop {
    /// Labels pushed after popping (swap: one), outermost first; empty:
    /// pop (PHP, or unlabelled member of a labelled route).
    pub out_labels: Vec<u32>,
    pub port: u16,
    #[serde(serialize_with = "display_opt")]
    pub gateway: Option<IpAddr>,
    /// ECMP share (group slots).
    pub weight: u16,
}

fn display_opt<S: Serializer>(v: &Option<IpAddr>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(a) => s.collect_str(a),
        None => s.serialize_none(),
    }
}

/// One ILM entry, for `show mpls table`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LabelInfo {
    pub in_label: u32,
    /// Owner (`ldp`, `bgp`, `frr-static`, or the number).
    pub protocol: String,
    /// `swap`, `php`, `swap-push`, `explicit-null`, `pop-lookup`, `ecmp`.
    pub action: String,
    /// In the LFIB (false: no usable path).
    pub installed: bool,
    /// `pop-lookup`: the VRF the packet is routed in (1-based position in
    /// `vrfs:`, the VPN label of that VRF); 0: the global table.
    pub vrf: u16,
    pub hops: Vec<LabelHop>,
}

/// A labelled route, for `show mpls forwarding`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FtnInfo {
    #[serde(serialize_with = "display")]
    pub prefix: Prefix,
    pub hops: Vec<LabelHop>,
}

/// Label side of the FIB in numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MplsFibSummary {
    pub ilm_entries: usize,
    pub ilm_unresolvable: usize,
    /// Installed routes with a labelled target.
    pub ftn_routes: usize,
    pub nhlfes: usize,
    pub nhlfe_capacity: u32,
    pub quarantined_nhlfes: usize,
    pub counters: MplsFibCounters,
    pub ftn: Vec<FtnInfo>,
}

fn action_of(labels: &[u32]) -> &'static str {
    match labels {
        [] => "php",
        [0] | [2] => "explicit-null",
        [_] => "swap",
        _ => "swap-push",
    }
}

impl Pool {
    /// The next-hop id behind a plain id or an NHLFE id (its primary).
    pub(super) fn hop_of(&self, id: u32) -> u32 {
        if id & NHLFE_BIT != 0 && id & GROUP_BIT == 0 {
            return self
                .lfib
                .nhlfe(id & !NHLFE_BIT)
                .map_or(u32::MAX, |n| n.primary.next_hop);
        }
        id
    }

    fn undo_labelled(&mut self, res: LabelRes) {
        for n in res.nhlfes {
            // The last reference only if this call made it: never
            // published, no reader can hold it.
            if self.unref_nhlfe(n) {
                self.lfib.clear_nhlfe(n);
                self.nhlfe_ids.unalloc(n);
            }
        }
        for h in res.hops {
            self.release_hop(h);
        }
    }

    /// Drops one reference to shared NHLFE `n`; true when it was the last
    /// (the id is then the caller's to free).
    fn unref_nhlfe(&mut self, n: u32) -> bool {
        let Some(key) = self.nhlfe_keys.get(&n) else {
            return true;
        };
        let Some(e) = self.shared_nhlfes.get_mut(key) else {
            return true;
        };
        e.1 -= 1;
        if e.1 > 0 {
            return false;
        }
        if let Some(key) = self.nhlfe_keys.remove(&n) {
            self.shared_nhlfes.remove(&key);
        }
        true
    }

    /// The NHLFE pushing `stack` toward next hop `hop`: the live one with
    /// that content (one more reference), else a new one.
    fn acquire_nhlfe(&mut self, hop: u32, stack: LabelStack) -> Result<u32, FibError> {
        let key = (hop, stack);
        if let Some(e) = self.shared_nhlfes.get_mut(&key) {
            e.1 += 1;
            return Ok(e.0);
        }
        let n = self.nhlfe_ids.alloc().ok_or(FibError::NhlfeFull)?;
        let e = Nhlfe {
            primary: Path {
                next_hop: hop,
                labels: stack,
            },
            backup: None,
            protection: None,
        };
        if self.lfib.set_nhlfe(n, &e).is_err() {
            self.nhlfe_ids.unalloc(n);
            return Err(FibError::NhlfeFull);
        }
        self.shared_nhlfes.insert(key, (n, 1));
        self.nhlfe_keys.insert(n, key);
        Ok(n)
    }

    /// Target id for `paths` (each: next hop + labels): an NHLFE per
    /// labelled path, the plain next hop for an unlabelled one, a group
    /// when several. Paths whose interface is not a port are skipped;
    /// none left is `Owned::None`. Takes nothing on error.
    pub(super) fn acquire_labelled(
        &mut self,
        paths: &[LabelPath],
        map: &dyn Fn(u32) -> Option<u16>,
    ) -> Result<Owned, FibError> {
        let mut res = LabelRes::default();
        let mut members = Vec::with_capacity(paths.len());
        for p in paths {
            let Some(port) = p.oif.and_then(|i| map_port(map, i)) else {
                continue;
            };
            let Ok(stack) = LabelStack::new(&p.labels) else {
                self.undo_labelled(res);
                return Err(FibError::BadLabel);
            };
            let hop = match self.acquire_hop(NextHop {
                port,
                gateway: p.via,
            }) {
                Ok(h) => h,
                Err(e) => {
                    self.undo_labelled(res);
                    return Err(e);
                }
            };
            res.hops.push(hop);
            if stack.is_empty() {
                members.push(hop);
                continue;
            }
            let n = match self.acquire_nhlfe(hop, stack) {
                Ok(n) => n,
                Err(e) => {
                    self.undo_labelled(res);
                    return Err(e);
                }
            };
            res.nhlfes.push(n);
            members.push(NHLFE_BIT | n);
        }
        let target = match members.len() {
            0 => {
                self.undo_labelled(res);
                return Ok(Owned::None);
            }
            1 => members[0],
            n if n > MAX_GROUP_MEMBERS => {
                self.undo_labelled(res);
                return Err(FibError::GroupTooLarge);
            }
            _ => {
                members.sort_unstable();
                match self.alloc_group(members.clone()) {
                    Ok(g) => {
                        if let Some(s) = self.group_info.get_mut(g as usize) {
                            *s = Some(members);
                        }
                        res.group = Some(g);
                        GROUP_BIT | g
                    }
                    Err(e) => {
                        self.undo_labelled(res);
                        return Err(e);
                    }
                }
            }
        };
        let key = self.next_key;
        self.next_key = self.next_key.wrapping_add(1);
        self.labelled.insert(key, res);
        Ok(Owned::Labelled { key, target })
    }

    /// Give back what a labelled target held (after nothing points at it
    /// any more: ids go to quarantine).
    pub(super) fn release_labelled(&mut self, key: u32) {
        let Some(res) = self.labelled.remove(&key) else {
            return;
        };
        if let Some(g) = res.group {
            self.free_group(g);
        }
        for n in res.nhlfes {
            if self.unref_nhlfe(n) {
                self.nhlfe_ids.release(n);
            }
        }
        for h in res.hops {
            self.release_hop(h);
        }
    }

    /// The ways out of a target id as installed (members of a group with
    /// their slot counts).
    pub(super) fn label_hops(&self, target: u32) -> Vec<LabelHop> {
        let one = |id: u32, weight: u16| -> Option<LabelHop> {
            let (hop, labels) = if id & NHLFE_BIT != 0 {
                let n = self.lfib.nhlfe(id & !NHLFE_BIT)?;
                (n.primary.next_hop, n.primary.labels.as_slice().to_vec())
            } else {
                (id, Vec::new())
            };
            let nh = self.info(hop)?;
            Some(LabelHop {
                out_labels: labels,
                port: nh.port,
                gateway: nh.gateway,
                weight,
            })
        };
        if target & GROUP_BIT == 0 {
            return one(target, 1).into_iter().collect();
        }
        let Some(Some(members)) = self.group_info.get((target & !GROUP_BIT) as usize) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut i = 0;
        while i < members.len() {
            let id = members[i];
            let n = members[i..].iter().take_while(|&&m| m == id).count();
            out.extend(one(id, n as u16));
            i += n;
        }
        out
    }
}

impl Fib {
    /// The label FIB, for the workers' MPLS stage.
    pub fn lfib(&self) -> Arc<Lfib> {
        self.pool.lfib.clone()
    }

    /// A next-hop id for `nh` that stays valid for the FIB's lifetime
    /// (a configured bypass: referenced by the LFIB's facility backups,
    /// never released).
    pub fn hold_hop(&mut self, nh: NextHop) -> Result<u32, FibError> {
        self.pool.acquire_hop(nh)
    }

    /// Apply one label message from zebra.
    pub(super) fn apply_label(
        &mut self,
        m: &LabelMsg,
        map: &dyn Fn(u32) -> Option<u16>,
    ) -> Result<(), FibError> {
        match m {
            LabelMsg::LabelAdd(e) => self.set_ilm(e.in_label, e.protocol, &e.paths, map, false),
            LabelMsg::LabelDel { in_label } => {
                self.del_ilm(*in_label);
                Ok(())
            }
            LabelMsg::RouteAdd(r) => {
                if r.table != self.table() {
                    self.counters.other_table += 1;
                    return Ok(());
                }
                let Some(p) = Prefix::new(r.prefix, r.prefix_len) else {
                    return Err(self.note(FibError::BadPrefix));
                };
                self.labels.counters.ftn_updates += 1;
                let source = Source::Frr {
                    protocol: r.protocol,
                };
                let mut paths = r.paths.clone();
                if self.core.is_some() && r.prefix.is_ipv6() {
                    // An imported VPNv6 route's labelled path names its
                    // core neighbour only through zebra_lanyard_fpm.so
                    // (an IPv4-mapped gateway; stock FRR sends none).
                    // Without one, no neighbour could take the stack.
                    let before = paths.len();
                    paths.retain(|p| p.labels.is_empty() || p.via.is_some());
                    if paths.len() != before {
                        warn_vpnv6_without_gateway(p);
                    }
                }
                self.set_slot(p, source, Spec::Labelled(paths), map, false)
            }
            LabelMsg::RouteDel {
                prefix,
                prefix_len,
                table,
            } => {
                if *table != self.table() {
                    self.counters.other_table += 1;
                } else if let Some(p) = Prefix::new(*prefix, *prefix_len) {
                    self.remove(p, Source::Frr { protocol: 0 });
                }
                Ok(())
            }
        }
    }

    /// Tells this (the default VRF's) FIB which interface indexes are VRF
    /// label interfaces: ifindex → VRF (1-based).
    pub fn set_vrf_label_interfaces(&mut self, map: HashMap<u32, u16>) {
        self.labels.vrf_label = map;
    }

    /// The table a pop-and-lookup entry routes in: the VRF whose label
    /// interface every path names (bgpd's per-VRF VPN label, through
    /// zebra's `zread_vrf_label`), else 0, the global table (a path toward
    /// `lo` or none).
    fn pop_table(&self, paths: &[LabelPath]) -> u16 {
        let mut vrfs = paths
            .iter()
            .map(|p| p.oif.and_then(|i| self.labels.vrf_label.get(&i).copied()));
        match vrfs.next() {
            Some(Some(k)) if vrfs.all(|v| v == Some(k)) => k,
            _ => 0,
        }
    }

    /// Install or replace the ILM entry for `label`. On error the previous
    /// entry stays.
    fn set_ilm(
        &mut self,
        label: u32,
        protocol: u8,
        paths: &[LabelPath],
        map: &dyn Fn(u32) -> Option<u16>,
        force: bool,
    ) -> Result<(), FibError> {
        if !(FIRST_UNRESERVED..=MAX_LABEL).contains(&label) {
            return Err(self.note(FibError::BadLabel));
        }
        if self.labels.statics.contains_key(&label) {
            self.labels.counters.static_held += 1;
            return Ok(());
        }
        if !force {
            if let Some(e) = self.labels.ilm.get_mut(&label) {
                if e.protocol == protocol && e.paths == paths {
                    e.gen = self.gen;
                    return Ok(());
                }
            }
        }
        // zebra's pop-and-lookup (a local label whose FEC is ours): no
        // label to push and no gateway on any path.
        let pop = !paths.is_empty()
            && paths
                .iter()
                .all(|p| p.via.is_none() && p.labels.iter().all(|&l| l == IMPLICIT_NULL));
        let owned = if pop {
            Owned::None
        } else {
            self.pool
                .acquire_labelled(paths, map)
                .map_err(|e| self.note(e))?
        };
        let action = if pop {
            Some(IlmAction::PopLookup {
                af: PopAf::Any,
                table: self.pop_table(paths),
            })
        } else {
            owned.id().map(|target| IlmAction::Forward { target })
        };
        match action {
            Some(a) => {
                if self.pool.lfib.set_ilm(label, a).is_err() {
                    self.pool.release(owned);
                    return Err(self.note(FibError::BadLabel));
                }
            }
            None => {
                self.pool.lfib.clear_ilm(label);
                self.labels.counters.unresolvable += 1;
            }
        }
        self.labels.counters.label_adds += 1;
        let old = self.labels.ilm.insert(
            label,
            IlmEntry {
                protocol,
                paths: paths.to_vec(),
                owned,
                pop,
                gen: self.gen,
            },
        );
        if let Some(o) = old {
            // After the ILM moved away from it.
            self.pool.release(o.owned);
        }
        Ok(())
    }

    fn del_ilm(&mut self, label: u32) -> bool {
        let Some(e) = self.labels.ilm.remove(&label) else {
            return false;
        };
        self.pool.lfib.clear_ilm(label);
        self.pool.release(e.owned);
        self.labels.counters.label_dels += 1;
        true
    }

    /// Resync: label entries zebra did not replay go. Returns how many.
    pub(super) fn sweep_labels(&mut self) -> usize {
        let gen = self.gen;
        let stale: Vec<u32> = self
            .labels
            .ilm
            .iter()
            .filter(|(_, e)| e.gen != gen)
            .map(|(l, _)| *l)
            .collect();
        for l in &stale {
            self.del_ilm(*l);
        }
        self.labels.counters.swept += stale.len() as u64;
        stale.len()
    }

    /// Ports changed: re-resolve every label entry (generations kept).
    pub(super) fn refresh_labels(&mut self, map: &dyn Fn(u32) -> Option<u16>) {
        let all: Vec<(u32, u8, Vec<LabelPath>, u32)> = self
            .labels
            .ilm
            .iter()
            .map(|(l, e)| (*l, e.protocol, e.paths.clone(), e.gen))
            .collect();
        for (l, protocol, paths, gen) in all {
            let _ = self.set_ilm(l, protocol, &paths, map, true);
            if let Some(e) = self.labels.ilm.get_mut(&l) {
                e.gen = gen;
            }
        }
    }

    /// Make the VRFs' static VPN labels what `want` says (label → VRF,
    /// 1-based): each a pop into its VRF. A label that leaves is cleared;
    /// a label zebra had installed before the configuration took it is
    /// replaced (the configuration wins; zebra's later entries for it are
    /// counted `static_held`). Returns one line per change.
    pub fn set_static_vpn_labels(&mut self, want: &BTreeMap<u32, u16>) -> Vec<String> {
        let mut said = Vec::new();
        let gone: Vec<u32> = self
            .labels
            .statics
            .keys()
            .filter(|l| !want.contains_key(l))
            .copied()
            .collect();
        for l in gone {
            self.labels.statics.remove(&l);
            self.pool.lfib.clear_ilm(l);
            said.push(format!("- vpn label {l}"));
        }
        for (&l, &vrf) in want {
            if self.labels.statics.get(&l) == Some(&vrf) {
                continue;
            }
            if !(FIRST_UNRESERVED..=MAX_LABEL).contains(&l) {
                self.note(FibError::BadLabel);
                continue;
            }
            // zebra's entry for it, if any, goes (after the ILM moved).
            let old = self.labels.ilm.remove(&l);
            let pop = IlmAction::PopLookup {
                af: PopAf::Any,
                table: vrf,
            };
            if self.pool.lfib.set_ilm(l, pop).is_err() {
                self.note(FibError::BadLabel);
                if let Some(o) = old {
                    self.labels.ilm.insert(l, o);
                }
                continue;
            }
            if let Some(o) = old {
                self.pool.release(o.owned);
                self.labels.counters.static_held += 1;
            }
            self.labels.statics.insert(l, vrf);
            said.push(format!("+ vpn label {l} vrf {vrf}"));
        }
        said
    }

    /// Every label entry, by in-label: zebra's and the VRFs' static VPN
    /// labels (owner `static`).
    pub fn mpls_table(&self) -> Vec<LabelInfo> {
        let statics = self.labels.statics.iter().map(|(&l, &vrf)| LabelInfo {
            in_label: l,
            protocol: "static".into(),
            action: "pop-lookup".into(),
            installed: true,
            vrf,
            hops: Vec::new(),
        });
        let mut all: Vec<LabelInfo> = self
            .labels
            .ilm
            .iter()
            .map(|(l, e)| {
                let hops = match e.owned.id() {
                    Some(t) => self.pool.label_hops(t),
                    None => Vec::new(),
                };
                let action = if e.pop {
                    "pop-lookup"
                } else if hops.len() > 1 {
                    "ecmp"
                } else {
                    hops.first().map_or("none", |h| action_of(&h.out_labels))
                };
                LabelInfo {
                    in_label: *l,
                    protocol: protocol_name(e.protocol)
                        .map_or_else(|| e.protocol.to_string(), str::to_string),
                    action: action.to_string(),
                    installed: e.pop || e.owned.id().is_some(),
                    vrf: if e.pop { self.pop_table(&e.paths) } else { 0 },
                    hops,
                }
            })
            .collect();
        all.extend(statics);
        all.sort_by_key(|e| e.in_label);
        all
    }

    /// The label side in numbers, with the installed labelled routes.
    pub fn mpls_summary(&self) -> MplsFibSummary {
        let ftn: Vec<FtnInfo> = self
            .routes
            .iter()
            .filter_map(|(p, e)| {
                let (id, src) = e.installed?;
                let s = e.slots.iter().find(|s| s.source == src)?;
                // A VRF's static VPN routes push labels too (its VPN
                // label under the transport's).
                matches!(s.spec, Spec::Labelled(_) | Spec::Vpn { .. }).then(|| FtnInfo {
                    prefix: *p,
                    hops: match &self.core {
                        // An imported VPN route: its stack is the core's.
                        Some(c) if id & VIA_DEFAULT_BIT != 0 => c
                            .fib
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .pool
                            .label_hops(id & !VIA_DEFAULT_BIT),
                        _ => self.pool.label_hops(id),
                    },
                })
            })
            .collect();
        MplsFibSummary {
            ilm_entries: self.labels.ilm.len(),
            ilm_unresolvable: self
                .labels
                .ilm
                .values()
                .filter(|e| !e.pop && e.owned.id().is_none())
                .count(),
            ftn_routes: ftn.len(),
            nhlfes: self.pool.nhlfe_ids.live,
            nhlfe_capacity: self.pool.nhlfe_ids.cap,
            quarantined_nhlfes: self.pool.nhlfe_ids.pending(),
            counters: self.labels.counters,
            ftn,
        }
    }
}

/// Once per process: a VPNv6 route came without its core gateway, i.e. the
/// FPM module predates VPNv6 support (docs/vrf.md, "VPNv6").
fn warn_vpnv6_without_gateway(p: Prefix) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!(
            "VPN route {p} has a labelled path without a gateway: not installed \
             (rebuild zebra_lanyard_fpm.so with scripts/build-zebra-mpls.sh)"
        );
    }
}
