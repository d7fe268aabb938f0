//! Ethernet pseudowires (RFC 4448) in the control plane: programs the
//! LFIB's pseudowire slots and pop-to-pseudowire labels from the
//! configuration (`pseudowires:`), with labels either configured
//! (`static-labels`) or signalled by ldpd and delivered by the zebra
//! module's side channel, which this module answers (docs/mpls.md,
//! "Pseudowires").
//!
//! A pseudowire is programmed only when its labels are known, its
//! attachment circuit's port is up and the transport to the remote PE
//! resolves in the FIB (the remote PE's address routed to a next hop,
//! an LDP LSP or a group of them). The zebra module is answered `ok` only
//! then, else `err <reason>`, so ldpd shows the pseudowire down and
//! zebra retries it (every 30 s). A maintenance pass every 50 ms follows
//! route and link changes: a pseudowire whose transport or circuit went
//! away is unprogrammed (its frames are counted `down`). Such a later
//! change is pushed to zebra on the module's status connection (a second
//! connection that sent `op=subscribe`): `op=pw-status status=down` for a
//! pseudowire zebra was told `ok` about (zebra reports it not forwarding to
//! ldpd and retries), `status=up` for one zebra holds down that Lanyard
//! could now program (zebra retries at once instead of in 30 s).
//!
//! Pseudowire id = attachment circuit id, given when the pseudowire
//! first appears (at start: its position in `pseudowires:`) and kept for
//! as long as an entry of that name exists: a live `config apply`
//! ([`PseudowireManager::prepare`], [`PseudowireManager::commit`]) gives
//! new pseudowires free ids and leaves the others' ids, LFIB entries and
//! counters alone, so their frames are not disturbed.

use config::l2vpn::PseudowireConfig;
use config::Config;
use datapath::mpls::circuits::{AttachmentCircuit, PwCounters, PwPlane};
use datapath::Shared;
use labelfeed::{PwMessage, PwOp};
use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tables::lpm4::Lpm4;
use tables::mpls::{IlmAction, Lfib, Pseudowire, PwType};
use tables::{NeighborState, NextHopTable};

/// How often programmed pseudowires are checked against routes and links.
const MAINTAIN_EVERY: Duration = Duration::from_millis(50);

/// Environment of a restarted switch: where its predecessor left the
/// pseudowires zebra had installed ([`PseudowireManager::save`]).
pub const PW_JOURNAL_ENV: &str = "LANYARD_PW_JOURNAL";

/// How long a pseudowire resumed after `lanyard restart` may wait for its
/// transport (the routes restored from the FPM journal, the next hop's
/// MAC from the handed-over twin) before zebra is told it is down.
const RESUME_GRACE: Duration = Duration::from_secs(10);

/// Labels of one pseudowire (configured or signalled).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PwLabels {
    pub local: u32,
    pub remote: u32,
    pub control_word: bool,
}

/// State of one pseudowire, for `show mpls pseudowires`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PwStatus {
    /// Labels in use (configured, or from the last LDP install).
    pub labels: Option<PwLabels>,
    /// Programmed in the LFIB (frames flow).
    pub up: bool,
    /// Why not, when down.
    pub reason: String,
    /// The transport target programmed (LPM value of the remote PE).
    pub transport: Option<u32>,
    /// Install / uninstall requests from zebra, and those refused.
    pub installs: u64,
    pub refused: u64,
    /// zebra was last answered `ok` (it believes the pseudowire forwards).
    pub zebra_ok: bool,
    /// A retry was asked of zebra since its last refusal (or pushed down);
    /// at most one ask per refusal, so an install that ldpd withdraws
    /// again (the far end is down) does not loop.
    pub retry_asked: bool,
    /// The labels of zebra's last install, kept after an uninstall: zebra
    /// still holds the pseudowire and can be asked to retry it.
    pub signalled: Option<PwLabels>,
    /// Added or changed by a configuration change and not installed since:
    /// zebra may hold it refused, so it is asked to retry once it can
    /// forward.
    pub added: bool,
}

/// One configured pseudowire in the manager.
struct Slot {
    cfg: PseudowireConfig,
    /// Its attachment circuit's port index.
    port: u16,
    st: PwStatus,
    /// When its next hop was last asked for (ARP).
    poked: Option<Instant>,
    /// Resumed after a restart with zebra's labels: until this instant, or
    /// until it is programmed with its port attached, it is not reported
    /// down to zebra while its transport comes back.
    resumed: Option<Instant>,
    /// Resumed, and its circuit's port not attached by the new image yet:
    /// the port counts as up (it was a moment ago).
    trust_port: bool,
}

/// The pseudowires by id, and their order in `pseudowires:`.
#[derive(Default)]
struct Inner {
    slots: Vec<Option<Slot>>,
    order: Vec<u32>,
}

/// One pseudowire as `show mpls pseudowires` reports it.
#[derive(Clone, Debug)]
pub struct PwRow {
    pub id: u32,
    pub cfg: PseudowireConfig,
    pub status: PwStatus,
}

/// A checked `pseudowires:` change, ready to commit (see
/// [`PseudowireManager::prepare`]).
pub struct PwChange {
    /// Per entry of the new `pseudowires:`: its id.
    ids: Vec<u32>,
    /// Per entry: its port index.
    ports: Vec<u16>,
    cfg: Vec<PseudowireConfig>,
    plane: Option<Arc<PwPlane>>,
    /// The side channel, opened for the first signalled pseudowire.
    listener: Option<(OwnedFd, PathBuf)>,
}

/// The pseudowires and their state, shared with the API.
pub struct PseudowireManager {
    inner: Mutex<Inner>,
    /// The side channel's path, once listening.
    socket: Mutex<Option<PathBuf>>,
    /// Where the side channel listens (`routing.pseudowire-socket`).
    socket_path: PathBuf,
    lfib: Arc<Lfib>,
    fib4: Arc<Lpm4>,
    nexthops: Arc<NextHopTable>,
    shared: Arc<Shared>,
    /// Counters of every pseudowire id, shared by successive planes.
    counters: Arc<PwCounters>,
    /// The zebra module's status connection, when it subscribed.
    status_conn: Mutex<Option<OwnedFd>>,
    /// Status lines pushed to zebra (down, retry).
    pub pushed: std::sync::atomic::AtomicU64,
    /// The status connection's socket was full in this maintenance pass:
    /// the remaining lines wait for the next pass.
    status_full: std::sync::atomic::AtomicBool,
}

/// Fresh state of pseudowire `w`.
fn fresh_status(w: &PseudowireConfig) -> PwStatus {
    PwStatus {
        labels: w.static_labels.map(|l| PwLabels {
            local: l.local,
            remote: l.remote,
            control_word: w.control_word,
        }),
        up: false,
        reason: if w.static_labels.is_some() {
            "not resolved yet".into()
        } else {
            "waiting for LDP".into()
        },
        transport: None,
        installs: 0,
        refused: 0,
        zebra_ok: false,
        retry_asked: false,
        signalled: None,
        added: false,
    }
}

/// True when `a` and `b` program the LFIB alike (same labels, type,
/// control word, remote PE and signalling): only the circuit's MTU or
/// interface name differ, and the programmed pseudowire can stay.
fn same_programming(a: &PseudowireConfig, b: &PseudowireConfig) -> bool {
    a.port == b.port
        && a.vlan == b.vlan
        && a.neighbor == b.neighbor
        && a.pw_id == b.pw_id
        && a.control_word == b.control_word
        && a.static_labels == b.static_labels
        && a.ifname() == b.ifname()
}

impl PseudowireManager {
    /// The attachment circuits of `cfg`, for the data path.
    pub fn circuits(cfg: &Config) -> Vec<AttachmentCircuit> {
        cfg.pseudowires
            .iter()
            .map(|w| circuit(cfg.port_index(&w.port).unwrap_or(usize::MAX) as u16, w))
            .collect()
    }

    /// Publishes the attachment circuits, programs the static pseudowires
    /// and starts the maintenance thread and (when a pseudowire is
    /// signalled) the side-channel listener. Started whenever the router
    /// is, so a live `config apply` can add the first pseudowire.
    pub fn start(
        cfg: &Config,
        shared: &Arc<Shared>,
        lfib: Arc<Lfib>,
        fib4: Arc<Lpm4>,
        nexthops: Arc<NextHopTable>,
        threads: &mut Vec<JoinHandle<()>>,
    ) -> Result<Option<Arc<PseudowireManager>>, String> {
        let m = Arc::new(PseudowireManager {
            inner: Mutex::new(Inner::default()),
            socket: Mutex::new(None),
            socket_path: cfg
                .routing
                .pseudowire_socket
                .clone()
                .unwrap_or_else(|| config::l2vpn::DEFAULT_PSEUDOWIRE_SOCKET.into()),
            lfib,
            fib4,
            nexthops,
            shared: shared.clone(),
            counters: Arc::new(PwCounters::new(
                config::l2vpn::MAX_PSEUDOWIRES,
                cfg.switch.workers as usize,
            )),
            status_conn: Mutex::new(None),
            pushed: std::sync::atomic::AtomicU64::new(0),
            status_full: std::sync::atomic::AtomicBool::new(false),
        });
        let change = m.prepare(cfg)?;
        if let Some(t) = m.commit(change) {
            threads.push(t);
        }
        if let Some(path) = std::env::var_os(PW_JOURNAL_ENV) {
            std::env::remove_var(PW_JOURNAL_ENV);
            let n = m.resume(Path::new(&path));
            // Programmed now: the router restored zebra's routes before
            // starting us, and the workers read the handed-over rings as
            // soon as the ports attach.
            m.maintain();
            if n > 0 {
                let up = m
                    .inner
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .slots
                    .iter()
                    .flatten()
                    // Only resumed ones can be: zebra has installed none yet.
                    .filter(|s| s.cfg.static_labels.is_none() && s.st.up)
                    .count();
                tracing::info!(
                    "restart: {n} pseudowires signalled by LDP resumed with zebra's labels, {up} programmed at once"
                );
            }
        }
        {
            let m = m.clone();
            threads.push(
                std::thread::Builder::new()
                    .name("pseudowires".into())
                    .spawn(move || {
                        while !m.shared.stop.load(Ordering::Relaxed) {
                            std::thread::sleep(MAINTAIN_EVERY);
                            m.maintain();
                        }
                    })
                    .map_err(|e| format!("spawn pseudowires: {e}"))?,
            );
        }
        Ok(Some(m))
    }

    /// Checks `cfg.pseudowires` against the running ones and builds what
    /// [`commit`](Self::commit) publishes: ids (kept by name, free ids for
    /// new names), the attachment circuits for the data path, and the
    /// side channel when the first signalled pseudowire appears. Changes
    /// nothing; an error leaves the switch as it was.
    pub fn prepare(&self, cfg: &Config) -> Result<PwChange, String> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let cap = self.counters.capacity().min(self.lfib_pseudowires());
        let old_id = |name: &str| {
            inner
                .order
                .iter()
                .copied()
                .find(|&id| slot_name(&inner, id) == Some(name))
        };
        let mut ids: Vec<Option<u32>> = cfg.pseudowires.iter().map(|w| old_id(&w.name)).collect();
        // New names take free ids: first those no pseudowire had (a
        // worker may still be counting for one just removed), then the
        // removed ones.
        // 0: free, 1: kept, 2: removed by this change.
        let mut used = vec![0u8; cap];
        for &id in &inner.order {
            if let Some(u) = used.get_mut(id as usize) {
                *u = 2;
            }
        }
        for &id in ids.iter().flatten() {
            used[id as usize] = 1;
        }
        let mut fresh = (0..cap as u32)
            .filter(|&id| used[id as usize] == 0)
            .chain((0..cap as u32).filter(|&id| used[id as usize] == 2));
        for id in ids.iter_mut().filter(|i| i.is_none()) {
            *id =
                Some(fresh.next().ok_or_else(|| {
                    format!("pseudowires: no free pseudowire id (at most {cap})")
                })?);
        }
        let ids: Vec<u32> = ids.into_iter().flatten().collect();
        let ports: Vec<u16> = cfg
            .pseudowires
            .iter()
            .map(|w| {
                cfg.port_index(&w.port)
                    .map(|p| p as u16)
                    .ok_or_else(|| format!("pseudowires: {}: no port {:?}", w.name, w.port))
            })
            .collect::<Result<_, _>>()?;
        let plane = (!ids.is_empty()).then(|| {
            let n = ids.iter().max().map_or(0, |m| *m as usize + 1);
            let mut acs = vec![None; n];
            for ((id, port), w) in ids.iter().zip(&ports).zip(&cfg.pseudowires) {
                acs[*id as usize] = Some(circuit(*port, w));
            }
            Arc::new(PwPlane::with_counters(acs, self.counters.clone()))
        });
        let signalled = cfg.pseudowires.iter().any(|w| w.static_labels.is_none());
        let listener = if signalled && self.socket().is_none() {
            let path = self.socket_path.clone();
            let fd = listen(&path).map_err(|e| format!("pseudowire socket {path:?}: {e}"))?;
            Some((fd, path))
        } else {
            None
        };
        Ok(PwChange {
            ids,
            ports,
            cfg: cfg.pseudowires.clone(),
            plane,
            listener,
        })
    }

    /// Publishes a prepared change: unprograms the pseudowires removed or
    /// changed, publishes the new circuits, waits until no worker holds
    /// the old ones (so a reused id never carries the old circuit's
    /// frames), then programs what is new. Pseudowires the change leaves
    /// alone stay programmed throughout. Returns the side channel's
    /// thread when it was started.
    pub fn commit(self: &Arc<Self>, change: PwChange) -> Option<JoinHandle<()>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut old: Vec<Option<Slot>> = std::mem::take(&mut inner.slots);
        let mut slots: Vec<Option<Slot>> = Vec::new();
        slots.resize_with(
            change.ids.iter().max().map_or(0, |m| *m as usize + 1),
            || None,
        );
        let mut zero = Vec::new();
        for ((&id, &port), w) in change.ids.iter().zip(&change.ports).zip(&change.cfg) {
            let prev = old.get_mut(id as usize).and_then(Option::take);
            let slot = match prev {
                Some(p) if p.cfg.name == w.name && same_programming(&p.cfg, w) => Slot {
                    cfg: w.clone(),
                    port,
                    ..p
                },
                Some(mut p) if p.cfg.name == w.name => {
                    // Changed: unprogrammed now, programmed afresh below.
                    self.unprogram(id as usize, &mut p.st);
                    let mut st = fresh_status(w);
                    if w.static_labels.is_none() && p.cfg.static_labels.is_none() {
                        // zebra still holds it: told down, then asked to
                        // install it again once it can forward.
                        self.push_down(&p.cfg, &mut p.st, "changed_in_Lanyard");
                        st.signalled = p.st.signalled;
                    }
                    st.added = true;
                    tracing::info!(pseudowire = %w.name, "changed by configuration");
                    Slot {
                        cfg: w.clone(),
                        port,
                        st,
                        poked: None,
                        resumed: None,
                        trust_port: false,
                    }
                }
                other => {
                    if let Some(mut p) = other {
                        // A removed pseudowire's id, given to a new one.
                        self.unprogram(id as usize, &mut p.st);
                        self.push_down(&p.cfg, &mut p.st, "removed_from_Lanyard");
                        tracing::info!(pseudowire = %p.cfg.name, "removed by configuration");
                    }
                    zero.push(id);
                    let mut st = fresh_status(w);
                    st.added = true;
                    tracing::info!(pseudowire = %w.name, "added by configuration");
                    Slot {
                        cfg: w.clone(),
                        port,
                        st,
                        poked: None,
                        resumed: None,
                        trust_port: false,
                    }
                }
            };
            slots[id as usize] = Some(slot);
        }
        // What is left of the old slots was removed.
        for (id, s) in old.iter_mut().enumerate() {
            if let Some(s) = s {
                self.unprogram(id, &mut s.st);
                self.push_down(&s.cfg, &mut s.st, "removed_from_Lanyard");
                tracing::info!(pseudowire = %s.cfg.name, "removed by configuration");
            }
        }
        let republish = !zero.is_empty() || !inner.order.is_empty() || change.plane.is_some();
        inner.slots = slots;
        inner.order = change.ids;
        if republish {
            self.shared.pseudowires.store(change.plane);
            // A worker that loaded the previous circuits finishes its batch
            // before an id they named is zeroed and programmed again.
            self.shared.quiesce(Duration::from_millis(200));
        }
        for id in zero {
            self.counters.zero(id);
        }
        let t = change.listener.map(|(fd, path)| {
            *self.socket.lock().unwrap_or_else(|e| e.into_inner()) = Some(path.clone());
            let m = self.clone();
            std::thread::Builder::new()
                .name("pw-socket".into())
                .spawn(move || m.serve(fd, &path))
        });
        drop(inner);
        self.maintain();
        match t {
            Some(Ok(t)) => Some(t),
            Some(Err(e)) => {
                tracing::warn!("spawn pw-socket: {e}");
                None
            }
            None => None,
        }
    }

    /// Pseudowire slots of the LFIB.
    fn lfib_pseudowires(&self) -> usize {
        self.lfib.pseudowire_capacity()
    }

    /// The side channel's path, when listening.
    pub fn socket(&self) -> Option<PathBuf> {
        self.socket
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every configured pseudowire, in `pseudowires:` order.
    pub fn rows(&self) -> Vec<PwRow> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .order
            .iter()
            .filter_map(|&id| {
                let s = inner.slots.get(id as usize)?.as_ref()?;
                Some(PwRow {
                    id,
                    cfg: s.cfg.clone(),
                    status: s.st.clone(),
                })
            })
            .collect()
    }

    /// The transport targets of the programmed pseudowires.
    pub fn transports(&self) -> Vec<u32> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner
            .slots
            .iter()
            .flatten()
            .filter_map(|s| s.st.transport)
            .collect()
    }

    fn port_up(&self, port: u16) -> bool {
        let t = self.shared.tables.load();
        t.l2.ports.get(port as usize).is_some_and(|p| p.up)
    }

    /// The transport target toward remote PE `peer`.
    fn transport(&self, peer: std::net::Ipv4Addr) -> Option<u32> {
        self.fib4.lookup(u32::from(peer))
    }

    /// Programs or unprograms pseudowire `id` as its labels, circuit and
    /// transport say; returns why it is down (`None`: up).
    fn program(
        &self,
        id: usize,
        w: &PseudowireConfig,
        port: u16,
        st: &mut PwStatus,
        trust_port: bool,
    ) -> Option<String> {
        let why = (|| {
            let l = st.labels.ok_or("no labels from LDP")?;
            if !trust_port && !self.port_up(port) {
                return Err("attachment circuit port down");
            }
            let t = self
                .transport(w.neighbor)
                .ok_or("no route to the remote PE")?;
            Ok((l, t))
        })();
        match why {
            Ok((l, t)) => {
                let pw = Pseudowire {
                    ac: id as u32,
                    pw_type: if w.vlan.is_some() {
                        PwType::EthernetTagged
                    } else {
                        PwType::Ethernet
                    },
                    control_word: l.control_word,
                    remote_label: l.remote,
                    transport: t,
                };
                if st.up && st.transport == Some(t) && self.lfib.pseudowire(id as u32) == Some(pw) {
                    return None;
                }
                if let Err(e) = self.lfib.set_pseudowire(id as u32, &pw) {
                    self.unprogram(id, st);
                    return Some(format!("LFIB refused the pseudowire: {e:?}"));
                }
                if let Err(e) = self
                    .lfib
                    .set_ilm(l.local, IlmAction::PopToPseudowire { pw: id as u32 })
                {
                    self.unprogram(id, st);
                    return Some(format!("LFIB refused local label {}: {e:?}", l.local));
                }
                st.up = true;
                st.transport = Some(t);
                st.reason.clear();
                None
            }
            Err(r) => {
                self.unprogram(id, st);
                Some(r.to_string())
            }
        }
    }

    fn unprogram(&self, id: usize, st: &mut PwStatus) {
        if let Some(l) = st.labels {
            if self.lfib.ilm(l.local) == Some(IlmAction::PopToPseudowire { pw: id as u32 }) {
                self.lfib.clear_ilm(l.local);
            }
        }
        self.lfib.clear_pseudowire(id as u32);
        st.up = false;
        st.transport = None;
    }

    /// One maintenance pass over every pseudowire.
    pub fn maintain(&self) {
        self.status_full.store(false, Ordering::Relaxed);
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        for (id, s) in inner.slots.iter_mut().enumerate() {
            let Some(s) = s else {
                continue;
            };
            // A pseudowire resumed after a restart was forwarding a moment
            // ago: its circuit's port counts as up until the new image has
            // attached it (the workers read the handed-over rings as soon
            // as the ports are attached, and would drop what waited there
            // for the next pass), or until the grace ends.
            if s.resumed.is_some_and(|until| Instant::now() >= until) {
                s.resumed = None;
            }
            if s.trust_port && (s.resumed.is_none() || self.port_up(s.port)) {
                s.trust_port = false;
            }
            let down = self.program(id, &s.cfg, s.port, &mut s.st, s.trust_port);
            if down.is_none() && !s.trust_port {
                // Fully back: ordinary reporting from now on.
                s.resumed = None;
            }
            if let Some(r) = down {
                if r != s.st.reason {
                    tracing::info!(pseudowire = %s.cfg.name, "down: {r}");
                }
                s.st.reason = r;
            } else if let Some(t) = s.st.transport {
                self.resolve_next_hop(s, t);
            }
            if s.cfg.static_labels.is_none() {
                self.tell_zebra(s);
            }
        }
    }

    /// Writes the signalled pseudowires zebra holds as forwarding (their
    /// labels from its last install), for the image `lanyard restart`
    /// executes ([`PW_JOURNAL_ENV`]). zebra does not install them again
    /// after a restart: it never learns of it (the module only re-opens
    /// its connections; nothing in zebra re-installs on that), so
    /// without this the new image would wait for labels that never come
    /// while ldpd shows the pseudowires up.
    /// One JSON object a line; returns how many.
    pub fn save(&self, path: &Path) -> std::io::Result<usize> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        let mut n = 0;
        for s in inner.slots.iter().flatten() {
            let (Some(l), true, None) = (s.st.labels, s.st.zebra_ok, s.cfg.static_labels) else {
                continue;
            };
            let line = serde_json::json!({
                "name": s.cfg.name,
                "local": l.local,
                "remote": l.remote,
                "cw": l.control_word,
            });
            out.push_str(&line.to_string());
            out.push('\n');
            n += 1;
        }
        std::fs::write(path, out)?;
        Ok(n)
    }

    /// Takes the pseudowires [`save`](Self::save) left: each configured,
    /// signalled pseudowire of that name gets its labels back, as if zebra
    /// had just installed them and been answered `ok`, and is programmed
    /// as soon as its transport resolves (the maintenance pass). Lines
    /// that name no such pseudowire, or do not parse, are skipped and
    /// logged. The file is removed. Returns how many were resumed.
    pub fn resume(&self, path: &Path) -> usize {
        let Ok(text) = std::fs::read_to_string(path) else {
            return 0;
        };
        let _ = std::fs::remove_file(path);
        let until = Instant::now() + RESUME_GRACE;
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let v: serde_json::Value = serde_json::from_str(line).unwrap_or_default();
            let label = |k: &str| {
                v[k].as_u64()
                    .and_then(|l| u32::try_from(l).ok())
                    .filter(|&l| (16..1 << 20).contains(&l))
            };
            let (Some(name), Some(local), Some(remote), Some(cw)) = (
                v["name"].as_str(),
                label("local"),
                label("remote"),
                v["cw"].as_bool(),
            ) else {
                tracing::warn!("restart: pseudowire line skipped (malformed): {line}");
                continue;
            };
            let Some(s) = inner
                .slots
                .iter_mut()
                .flatten()
                .find(|s| s.cfg.name == name && s.cfg.static_labels.is_none())
            else {
                tracing::warn!(
                    "restart: pseudowire {name} is no longer signalled here: not resumed"
                );
                continue;
            };
            let labels = PwLabels {
                local,
                remote,
                control_word: cw,
            };
            s.st.labels = Some(labels);
            s.st.signalled = Some(labels);
            s.st.zebra_ok = true;
            s.st.added = false;
            s.st.reason = "resumed after a restart: waiting for its transport".into();
            s.resumed = Some(until);
            s.trust_port = true;
            n += 1;
        }
        n
    }

    /// Pushes a signalled pseudowire's change since zebra's last install
    /// to the module's status connection: down after `ok`, or ready
    /// after a refusal (so zebra retries now, not in 30 s) — also for a
    /// pseudowire a configuration change just added, which zebra may
    /// hold refused.
    fn tell_zebra(&self, s: &mut Slot) {
        // Resumed after a restart and not back yet: zebra holds it as
        // forwarding; reported once the grace is over.
        if s.resumed.is_some() {
            return;
        }
        let w = &s.cfg;
        let st = &mut s.st;
        if st.zebra_ok && !st.up {
            let reason = st.reason.replace(' ', "_");
            self.push_down(w, st, &reason);
            return;
        }
        let ready = self.port_up(s.port)
            && (if st.labels.is_some() {
                st.up
            } else {
                self.transport(w.neighbor).is_some()
            });
        if !st.zebra_ok
            && !st.retry_asked
            && (st.signalled.is_some() || st.added)
            && ready
            && self.send_status(
                w,
                &format!("v=1 op=pw-status ifname={} vrf=0 status=up\n", w.ifname()),
            )
        {
            st.retry_asked = true;
            st.added = false;
        }
    }

    /// Tells zebra that a pseudowire it was answered `ok` for no longer
    /// forwards (no-op otherwise).
    fn push_down(&self, w: &PseudowireConfig, st: &mut PwStatus, reason: &str) {
        if !st.zebra_ok || w.static_labels.is_some() {
            return;
        }
        // Not sent (socket full, or no status connection yet): zebra still
        // holds it as forwarding, so the next pass tries again.
        if self.send_status(
            w,
            &format!(
                "v=1 op=pw-status ifname={} vrf=0 status=down reason={reason}\n",
                w.ifname()
            ),
        ) {
            st.zebra_ok = false;
            st.retry_asked = false;
        }
    }

    /// One line on the module's status connection, if it subscribed;
    /// whether it was sent. Never blocks: when the socket is full (zebra's
    /// main thread busy, or a burst — every pseudowire behind a port that
    /// went down) the line and the rest of this pass wait for the next
    /// pass; the connection is kept (dropping it lost every line until
    /// zebra reconnected, a second later).
    fn send_status(&self, w: &PseudowireConfig, line: &str) -> bool {
        if self.status_full.load(Ordering::Relaxed) {
            return false;
        }
        let mut c = self.status_conn.lock().unwrap_or_else(|e| e.into_inner());
        let Some(fd) = c.as_ref() else {
            return false;
        };
        // SAFETY: sending from our own buffer on our own descriptor.
        let sent = unsafe {
            libc::send(
                fd.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::WouldBlock {
                self.status_full.store(true, Ordering::Relaxed);
            } else {
                tracing::warn!("pseudowire status connection lost: {e}");
                *c = None;
            }
            return false;
        }
        self.pushed.fetch_add(1, Ordering::Relaxed);
        tracing::info!(pseudowire = %w.name, "told zebra: {}", line.trim_end());
        true
    }

    /// The data path sends a pseudowire's frames only to a next hop whose
    /// MAC is known; when it is not, a datagram to it (discard port, at
    /// most once a second) makes the kernel behind the TAP twin resolve
    /// it, and the neighbour mirror brings the MAC to the data path.
    fn resolve_next_hop(&self, s: &mut Slot, target: u32) {
        let Some(r) = self.lfib.resolve(&self.nexthops, target, 0) else {
            return;
        };
        let gw = r.next_hop.gateway.unwrap_or(IpAddr::V4(s.cfg.neighbor));
        let known = self.shared.l3.load().as_ref().is_some_and(|l3| {
            l3.neighbors
                .lookup(gw)
                .is_some_and(|n| n.state != NeighborState::Incomplete)
        });
        if known
            || s.poked
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
        {
            return;
        }
        s.poked = Some(Instant::now());
        let any: IpAddr = if gw.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        };
        if let Ok(sock) = std::net::UdpSocket::bind((any, 0)) {
            let _ = sock.send_to(&[0], (gw, 9));
        }
    }

    /// Handles one side-channel line; the answer to send back.
    pub fn handle_line(&self, line: &str) -> String {
        let msg = match PwMessage::parse(line) {
            Ok(m) => m,
            Err(e) => return format!("err malformed: {e}"),
        };
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Some(id) = find(&inner, &msg) else {
            return format!(
                "err no attachment circuit for l2vpn {} pw-id {} (not in pseudowires:)",
                msg.vpn.as_deref().unwrap_or("-"),
                msg.pw_id
            );
        };
        let Some(s) = inner.slots.get_mut(id).and_then(Option::as_mut) else {
            return "err no such pseudowire".into();
        };
        // zebra speaks for it again: a restart's resumed labels yield.
        s.resumed = None;
        s.trust_port = false;
        let (w, port, st) = (&s.cfg, s.port, &mut s.st);
        st.installs += 1;
        if w.static_labels.is_some() {
            st.refused += 1;
            st.zebra_ok = false;
            return format!("err l2vpn {} has static labels in Lanyard", w.name);
        }
        match msg.op {
            PwOp::Uninstall => {
                self.unprogram(id, st);
                st.zebra_ok = false;
                st.labels = None;
                st.reason = "uninstalled by LDP".into();
                "ok".into()
            }
            PwOp::Install => {
                if msg.pw_type != w.pw_type() {
                    st.refused += 1;
                    st.zebra_ok = false;
                    return format!(
                        "err type {} signalled, attachment circuit is type {}",
                        msg.pw_type,
                        w.pw_type()
                    );
                }
                let labels = PwLabels {
                    local: msg.local_label,
                    remote: msg.remote_label,
                    control_word: msg.control_word,
                };
                if st.labels.is_some_and(|old| old.local != labels.local) {
                    self.unprogram(id, st);
                }
                st.labels = Some(labels);
                st.signalled = Some(labels);
                st.added = false;
                match self.program(id, w, port, st, false) {
                    None => {
                        st.zebra_ok = true;
                        "ok".into()
                    }
                    Some(r) => {
                        st.zebra_ok = false;
                        st.retry_asked = false;
                        st.refused += 1;
                        st.reason = r.clone();
                        format!("err {r}")
                    }
                }
            }
        }
    }

    /// Accepts the zebra module's connections and answers their lines
    /// until stop: the data-plane thread's request connection (one line,
    /// one answer) and the main thread's status connection, which sends
    /// `op=subscribe` once and then only reads what `tell_zebra` pushes.
    fn serve(&self, listener: OwnedFd, path: &Path) {
        /// Connections served at once (zebra opens two; a restarted zebra
        /// may leave a stale one until it is seen closed).
        const MAX_CONNS: usize = 8;
        let mut buf = [0u8; 4096];
        let mut conns: Vec<OwnedFd> = Vec::new();
        while !self.shared.stop.load(Ordering::Relaxed) {
            let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
                .chain(conns.iter().map(AsRawFd::as_raw_fd))
                .map(|fd| libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            // SAFETY: a valid array of pollfds.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 200) };
            if n <= 0 {
                continue;
            }
            let mut closed = Vec::new();
            for (k, p) in fds.iter().enumerate().skip(1) {
                if p.revents == 0 {
                    continue;
                }
                // SAFETY: reading into our own buffer.
                let n = unsafe { libc::recv(p.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
                if n <= 0 {
                    closed.push(k - 1);
                    continue;
                }
                let line = String::from_utf8_lossy(&buf[..n as usize]);
                if is_subscribe(&line) {
                    // The status connection: owned by `status_conn` from
                    // now on (a previous one is dropped).
                    closed.push(k - 1);
                    let fd = conns[k - 1].try_clone();
                    if let Ok(fd) = fd {
                        // SAFETY: sending from a static buffer.
                        unsafe {
                            libc::send(fd.as_raw_fd(), b"ok".as_ptr().cast(), 2, libc::MSG_NOSIGNAL)
                        };
                        *self.status_conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(fd);
                        tracing::info!("zebra module subscribed to pseudowire status");
                    }
                    continue;
                }
                let answer = self.handle_line(&line);
                tracing::debug!("pseudowire side channel: {} -> {answer}", line.trim_end());
                // SAFETY: sending from our own buffer.
                let sent = unsafe {
                    libc::send(
                        p.fd,
                        answer.as_ptr().cast(),
                        answer.len(),
                        libc::MSG_NOSIGNAL,
                    )
                };
                if sent < 0 {
                    closed.push(k - 1);
                }
            }
            for k in closed.into_iter().rev() {
                conns.remove(k);
            }
            if fds[0].revents != 0 {
                // SAFETY: accept on our listening socket; the result is owned.
                let c = unsafe {
                    libc::accept4(
                        listener.as_raw_fd(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_CLOEXEC,
                    )
                };
                if c >= 0 {
                    // SAFETY: `c` is a fresh descriptor from accept4.
                    let fd = unsafe { OwnedFd::from_raw_fd(c) };
                    if conns.len() >= MAX_CONNS {
                        conns.remove(0);
                    }
                    conns.push(fd);
                }
            }
        }
        let _ = std::fs::remove_file(path);
    }
}

/// The attachment circuit of pseudowire `w` on port index `port`.
fn circuit(port: u16, w: &PseudowireConfig) -> AttachmentCircuit {
    AttachmentCircuit {
        port,
        vlan: w.vlan,
        mtu: w.mtu,
        peer: IpAddr::V4(w.neighbor),
    }
}

fn slot_name(inner: &Inner, id: u32) -> Option<&str> {
    inner
        .slots
        .get(id as usize)?
        .as_ref()
        .map(|s| s.cfg.name.as_str())
}

/// The configured pseudowire a zebra message is about: by l2vpn name
/// (and pw-id when zebra gives one); by interface name only when the
/// message names no l2vpn.
fn find(inner: &Inner, msg: &PwMessage) -> Option<usize> {
    inner.slots.iter().position(|s| {
        s.as_ref().is_some_and(|s| match msg.vpn.as_deref() {
            Some(v) => s.cfg.name == v && (msg.pw_id == 0 || s.cfg.pw_id == msg.pw_id),
            None => s.cfg.ifname() == msg.ifname,
        })
    })
}

/// `v=1 op=subscribe`: the module's status connection announcing itself.
fn is_subscribe(line: &str) -> bool {
    line.split_whitespace().any(|kv| kv == "op=subscribe")
}

/// A listening unix SOCK_SEQPACKET socket at `path` (a stale file from a
/// previous run is replaced; the directory is created).
fn listen(path: &Path) -> std::io::Result<OwnedFd> {
    use std::os::unix::ffi::OsStrExt;
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    let _ = std::fs::remove_file(path);
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: a plain sockaddr_un, zeroed.
    let mut sa: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= sa.sun_path.len() {
        return Err(std::io::Error::other("path too long for a unix socket"));
    }
    sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sa.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    // SAFETY: creating a socket; owned right after.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: binding our socket to a valid sockaddr_un.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sa as *const libc::sockaddr_un).cast(),
            std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    allow_frr(path);
    // SAFETY: listen on our bound socket.
    if unsafe { libc::listen(fd.as_raw_fd(), 4) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

/// zebra runs as user `frr`: connecting needs write permission on the
/// socket file. Group `frr`, mode 0660, when that group exists; else the
/// file keeps the umask's mode (zebra must then run as root).
fn allow_frr(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let (Ok(c), Ok(group)) = (
        std::ffi::CString::new(path.as_os_str().as_bytes()),
        std::ffi::CString::new("frr"),
    ) else {
        return;
    };
    // SAFETY: getgrnam with a valid C string; the result is read at once.
    let gr = unsafe { libc::getgrnam(group.as_ptr()) };
    if gr.is_null() {
        tracing::warn!("no group frr: {path:?} keeps its mode; zebra must run as root to connect");
        return;
    }
    // SAFETY: `gr` is non-null and points to libc's static group entry.
    let gid = unsafe { (*gr).gr_gid };
    // SAFETY: chown/chmod on the path we just bound.
    unsafe {
        libc::chown(c.as_ptr(), u32::MAX, gid);
        libc::chmod(c.as_ptr(), 0o660);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStrExt;

    fn cfg(pws: &[(&str, &str, u32)]) -> Config {
        let mut y = String::from(
            "ports: [{name: up, mode: routed, addresses: [10.0.0.1/30]}, {name: a}, {name: b}, {name: c}]\npseudowires:\n",
        );
        for (name, port, label) in pws {
            y.push_str(&format!(
                "  - {{name: {name}, port: {port}, neighbor: 10.0.0.2, pw-id: {label}, static-labels: {{local: {label}, remote: {label}}}}}\n"
            ));
        }
        if pws.is_empty() {
            y = y.replace("pseudowires:\n", "");
        }
        config::parse(&y, "t.yaml").unwrap()
    }

    fn ids(m: &PseudowireManager) -> Vec<(String, u32)> {
        m.rows().into_iter().map(|r| (r.cfg.name, r.id)).collect()
    }

    /// Ids stay with names across changes; a new name takes an id no
    /// pseudowire had before one just removed; the published circuits
    /// follow; a new id's counters start at zero.
    #[test]
    fn ids_are_kept_by_name_across_changes() {
        let c = cfg(&[("x", "a", 100), ("y", "b", 101)]);
        let shared = Arc::new(Shared::new(config::build::initial_tables(&c), 16));
        let lfib = Arc::new(Lfib::new(tables::mpls::LfibSize::default()));
        let mut threads = Vec::new();
        let m = PseudowireManager::start(
            &c,
            &shared,
            lfib.clone(),
            Arc::new(Lpm4::new()),
            Arc::new(NextHopTable::new(16, 4)),
            &mut threads,
        )
        .unwrap()
        .unwrap();
        let s = |n: &str, id: u32| (n.to_string(), id);
        assert_eq!(ids(&m), vec![s("x", 0), s("y", 1)]);
        // x removed, z added (in front), y moved to port c.
        let c2 = cfg(&[("z", "a", 102), ("y", "c", 101)]);
        let ch = m.prepare(&c2).unwrap();
        assert!(m.commit(ch).is_none());
        assert_eq!(ids(&m), vec![s("z", 2), s("y", 1)]);
        let plane = shared.pseudowires.load_full().unwrap();
        assert_eq!(plane.circuit(0), None);
        assert_eq!(plane.circuit(1).map(|ac| ac.port), Some(3));
        assert_eq!(plane.circuit(2).map(|ac| ac.port), Some(1));
        // Frames on a circuit not programmed count as `down` into its id.
        plane.count_drop(0, 2, datapath::mpls::circuits::PwDrop::Down);
        assert_eq!(plane.totals(2).drops[0], 1);
        // w takes the lowest free id (0, x's); z's counts stay z's.
        let c3 = cfg(&[("z", "a", 102), ("y", "c", 101), ("w", "b", 103)]);
        let ch = m.prepare(&c3).unwrap();
        m.commit(ch);
        assert_eq!(ids(&m), vec![s("z", 2), s("y", 1), s("w", 0)]);
        let plane = shared.pseudowires.load_full().unwrap();
        assert_eq!(plane.totals(2).drops[0], 1);
        assert_eq!(plane.totals(0), Default::default());
        // Everything removed: no circuits published.
        let ch = m.prepare(&cfg(&[])).unwrap();
        m.commit(ch);
        assert!(m.rows().is_empty());
        assert!(shared.pseudowires.load().is_none());
        shared.stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
    }

    /// Connects to the side channel at `sock` as the zebra module's status
    /// connection does, and subscribes.
    fn subscribe(sock: &Path) -> OwnedFd {
        // SAFETY: plain socket calls on a descriptor owned below.
        let fd = unsafe {
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0);
            let mut sa: libc::sockaddr_un = std::mem::zeroed();
            sa.sun_family = libc::AF_UNIX as libc::sa_family_t;
            for (d, b) in sa.sun_path.iter_mut().zip(sock.as_os_str().as_bytes()) {
                *d = *b as libc::c_char;
            }
            let end = Instant::now() + Duration::from_secs(5);
            while libc::connect(
                fd,
                (&sa as *const libc::sockaddr_un).cast(),
                std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
            ) != 0
            {
                assert!(Instant::now() < end, "no listener");
                std::thread::sleep(Duration::from_millis(20));
            }
            OwnedFd::from_raw_fd(fd)
        };
        let sub = b"v=1 op=subscribe\n";
        // SAFETY: sending from a static buffer.
        unsafe { libc::send(fd.as_raw_fd(), sub.as_ptr().cast(), sub.len(), 0) };
        let mut buf = [0u8; 512];
        // SAFETY: reading into our own buffer.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert_eq!(&buf[..n.max(0) as usize], b"ok");
        fd
    }

    /// Port `port`'s link state in the published tables.
    fn set_port_up(shared: &Shared, port: usize, up: bool) {
        let t = shared.tables.load();
        let mut l2 = t.l2.clone();
        l2.ports[port].up = up;
        shared.tables.store(Arc::new(tables::Tables {
            l2,
            mac: t.mac.clone(),
            learn_gate: t.learn_gate.clone(),
        }));
    }

    /// The next status line zebra would read within `wait`, if any.
    fn status_line(fd: &OwnedFd, wait: Duration) -> Option<String> {
        let mut buf = [0u8; 512];
        let end = Instant::now() + wait;
        loop {
            // SAFETY: reading into our own buffer.
            let n = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 {
                return Some(String::from_utf8_lossy(&buf[..n as usize]).into_owned());
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// `lanyard restart`: the signalled pseudowires zebra holds as
    /// forwarding leave with their labels and the next image resumes
    /// them. zebra never installs them again (it does not notice the
    /// restart), so before this the new image waited for labels that
    /// never came while ldpd showed the pseudowires up. A resumed one is
    /// programmed once its transport resolves and zebra is not told it is
    /// down meanwhile; then ordinary reporting resumes. Refused, static,
    /// unknown and malformed entries are not resumed.
    #[test]
    fn signalled_pseudowires_resume_with_zebras_labels_after_a_restart() {
        let dir = std::env::temp_dir().join(format!("lanyard-pwresume-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let yaml = |sock: &Path| {
            format!(
                "ports: [{{name: up, mode: routed, addresses: [10.0.0.1/30]}}, {{name: a}}, {{name: b}}, {{name: c}}]\n\
                 routing:\n  pseudowire-socket: {}\npseudowires:\n\
                 \x20 - {{name: s1, port: a, neighbor: 10.0.0.2, pw-id: 1}}\n\
                 \x20 - {{name: s2, port: b, neighbor: 10.0.0.2, pw-id: 2}}\n\
                 \x20 - {{name: st, port: c, vlan: 9, neighbor: 10.0.0.2, pw-id: 3, static-labels: {{local: 30, remote: 31}}}}\n",
                sock.display()
            )
        };
        let start = |c: &Config, threads: &mut Vec<JoinHandle<()>>| {
            let shared = Arc::new(Shared::new(config::build::initial_tables(c), 16));
            let fib4 = Arc::new(Lpm4::new());
            let lfib = Arc::new(Lfib::new(tables::mpls::LfibSize::default()));
            let m = PseudowireManager::start(
                c,
                &shared,
                lfib.clone(),
                fib4.clone(),
                Arc::new(NextHopTable::new(16, 4)),
                threads,
            )
            .unwrap()
            .unwrap();
            (m, shared, fib4, lfib)
        };
        let labels = |local, remote| PwLabels {
            local,
            remote,
            control_word: true,
        };
        // The old image: zebra installed s1 (answered ok) and s2 (refused).
        let c1 = config::parse(&yaml(&dir.join("old.sock")), "t.yaml").unwrap();
        let mut old_threads = Vec::new();
        let (old, old_shared, ..) = start(&c1, &mut old_threads);
        {
            let mut inner = old.inner.lock().unwrap();
            for s in inner.slots.iter_mut().flatten() {
                match s.cfg.name.as_str() {
                    "s1" => {
                        s.st.labels = Some(labels(20, 21));
                        s.st.zebra_ok = true;
                    }
                    "s2" => s.st.labels = Some(labels(22, 23)),
                    _ => {}
                }
            }
        }
        let journal = dir.join("switch.pw");
        assert_eq!(old.save(&journal).unwrap(), 1);
        old_shared.stop.store(true, Ordering::Relaxed);
        for t in old_threads {
            t.join().unwrap();
        }
        let mut j = std::fs::read_to_string(&journal).unwrap();
        j.push_str("{\n");
        j.push_str(r#"{"name":"gone","local":40,"remote":41,"cw":false}"#);
        j.push('\n');
        j.push_str(r#"{"name":"st","local":30,"remote":31,"cw":false}"#);
        j.push('\n');
        j.push_str(r#"{"name":"s2","local":3,"remote":23,"cw":true}"#);
        j.push('\n');
        std::fs::write(&journal, j).unwrap();

        // The new image.
        let sock = dir.join("new.sock");
        let c2 = config::parse(&yaml(&sock), "t.yaml").unwrap();
        let mut threads = Vec::new();
        let (m, shared, fib4, lfib) = start(&c2, &mut threads);
        let fd = subscribe(&sock);
        assert_eq!(m.resume(&journal), 1);
        assert!(!journal.exists(), "the journal is consumed");
        let row = |name: &str| m.rows().into_iter().find(|r| r.cfg.name == name).unwrap();
        let s1 = row("s1");
        assert_eq!(s1.status.labels, Some(labels(20, 21)));
        assert!(s1.status.zebra_ok && !s1.status.up, "{:?}", s1.status);
        assert_eq!(row("s2").status.labels, None);
        // Its transport is not back yet: zebra is not told it is down.
        assert_eq!(status_line(&fd, MAINTAIN_EVERY * 6), None);
        // The remote PE routed (the FPM journal), the circuit's port not
        // attached yet: programmed with zebra's labels, the port trusted,
        // so frames waiting in the handed-over rings are not dropped.
        fib4.insert(u32::from(std::net::Ipv4Addr::new(10, 0, 0, 0)), 30, 1)
            .unwrap();
        let end = Instant::now() + Duration::from_secs(5);
        while !row("s1").status.up {
            assert!(Instant::now() < end, "s1 never programmed");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(matches!(
            lfib.ilm(20),
            Some(IlmAction::PopToPseudowire { .. })
        ));
        // The port attached: still up; from now on a failure is reported
        // as before the restart.
        set_port_up(&shared, 1, true);
        std::thread::sleep(MAINTAIN_EVERY * 3);
        assert!(row("s1").status.up);
        assert_eq!(status_line(&fd, Duration::ZERO), None);
        set_port_up(&shared, 1, false);
        let line = status_line(&fd, Duration::from_secs(5)).expect("status=down");
        assert!(
            line.contains("ifname=mpw1") && line.contains("status=down"),
            "{line}"
        );
        shared.stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A burst of status lines larger than the status connection's socket
    /// (every signalled pseudowire ready at once, zebra not reading for a
    /// while) arrives whole once zebra reads: the lines that did not fit
    /// wait for the next passes and the connection is kept. Before, the
    /// first full send dropped the connection and the rest were lost.
    #[test]
    fn a_status_burst_larger_than_the_socket_arrives_whole() {
        const N: usize = 1500;
        let dir = std::env::temp_dir().join(format!("lanyard-pwburst-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("pw.sock");
        let mut y = format!(
            "ports: [{{name: up, mode: routed, addresses: [10.0.0.1/30]}}, {{name: a}}]\n\
             routing:\n  pseudowire-socket: {}\npseudowires:\n",
            sock.display()
        );
        for i in 0..N {
            y.push_str(&format!(
                "  - {{name: p{i}, port: a, vlan: {}, neighbor: 10.0.0.2, pw-id: {}}}\n",
                i + 1,
                i + 1
            ));
        }
        let c = config::parse(&y, "t.yaml").unwrap();
        let shared = Arc::new(Shared::new(config::build::initial_tables(&c), 16));
        let fib4 = Arc::new(Lpm4::new());
        let mut threads = Vec::new();
        let _m = PseudowireManager::start(
            &c,
            &shared,
            Arc::new(Lfib::new(tables::mpls::LfibSize::default())),
            fib4.clone(),
            Arc::new(NextHopTable::new(16, 4)),
            &mut threads,
        )
        .unwrap()
        .unwrap();
        // The module's status connection subscribes; then zebra is busy.
        let fd = subscribe(&sock);
        let mut buf = [0u8; 512];
        // Every pseudowire becomes ready at once: circuit port up, remote
        // PE routed.
        set_port_up(&shared, 1, true);
        fib4.insert(u32::from(std::net::Ipv4Addr::new(10, 0, 0, 0)), 30, 1)
            .unwrap();
        // zebra reads nothing for several maintenance passes.
        std::thread::sleep(MAINTAIN_EVERY * 6);
        let mut seen = std::collections::HashSet::new();
        let end = Instant::now() + Duration::from_secs(10);
        while seen.len() < N && Instant::now() < end {
            // SAFETY: reading into our own buffer.
            let n = unsafe {
                libc::recv(
                    fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n == 0 {
                break; // closed by Lanyard
            }
            if n < 0 {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let line = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
            assert!(line.contains("status=up"), "{line}");
            seen.insert(line);
        }
        shared.stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(seen.len(), N, "status lines received");
    }
}
