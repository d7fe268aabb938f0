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
//! Pseudowire id = attachment circuit id = position in `pseudowires:`.

use config::l2vpn::PseudowireConfig;
use config::Config;
use datapath::mpls::circuits::{AttachmentCircuit, PwPlane};
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
}

/// The pseudowires and their state, shared with the API.
pub struct PseudowireManager {
    pub cfg: Vec<PseudowireConfig>,
    pub status: Mutex<Vec<PwStatus>>,
    /// The side channel's path, when listening.
    pub socket: Option<PathBuf>,
    lfib: Arc<Lfib>,
    fib4: Arc<Lpm4>,
    nexthops: Arc<NextHopTable>,
    shared: Arc<Shared>,
    ports: Vec<u16>,
    /// Per pseudowire: when its next hop was last asked for (ARP).
    poked: Mutex<Vec<Option<Instant>>>,
    /// The zebra module's status connection, when it subscribed.
    status_conn: Mutex<Option<OwnedFd>>,
    /// Status lines pushed to zebra (down, retry).
    pub pushed: std::sync::atomic::AtomicU64,
}

impl PseudowireManager {
    /// The attachment circuits of `cfg`, for the data path.
    pub fn circuits(cfg: &Config) -> Vec<AttachmentCircuit> {
        cfg.pseudowires
            .iter()
            .map(|w| AttachmentCircuit {
                port: cfg.port_index(&w.port).unwrap_or(usize::MAX) as u16,
                vlan: w.vlan,
                mtu: w.mtu,
                peer: IpAddr::V4(w.neighbor),
            })
            .collect()
    }

    /// Publishes the attachment circuits, programs the static pseudowires
    /// and starts the maintenance thread and (when a pseudowire is
    /// signalled) the side-channel listener. `None` without pseudowires.
    pub fn start(
        cfg: &Config,
        shared: &Arc<Shared>,
        lfib: Arc<Lfib>,
        fib4: Arc<Lpm4>,
        nexthops: Arc<NextHopTable>,
        threads: &mut Vec<JoinHandle<()>>,
    ) -> Result<Option<Arc<PseudowireManager>>, String> {
        if cfg.pseudowires.is_empty() {
            return Ok(None);
        }
        let circuits = Self::circuits(cfg);
        let ports = circuits.iter().map(|c| c.port).collect();
        shared.pseudowires.store(Some(Arc::new(PwPlane::new(
            circuits,
            cfg.switch.workers as usize,
        ))));
        let signalled = cfg.pseudowires.iter().any(|w| w.static_labels.is_none());
        let socket = signalled.then(|| {
            cfg.routing
                .pseudowire_socket
                .clone()
                .unwrap_or_else(|| config::l2vpn::DEFAULT_PSEUDOWIRE_SOCKET.into())
        });
        let status = cfg
            .pseudowires
            .iter()
            .map(|w| PwStatus {
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
            })
            .collect();
        let m = Arc::new(PseudowireManager {
            cfg: cfg.pseudowires.clone(),
            status: Mutex::new(status),
            socket: socket.clone(),
            lfib,
            fib4,
            nexthops,
            shared: shared.clone(),
            ports,
            poked: Mutex::new(vec![None; cfg.pseudowires.len()]),
            status_conn: Mutex::new(None),
            pushed: std::sync::atomic::AtomicU64::new(0),
        });
        m.maintain();
        let spawn = |name: &str, f: Box<dyn FnOnce() + Send>| {
            std::thread::Builder::new()
                .name(name.into())
                .spawn(f)
                .map_err(|e| format!("spawn {name}: {e}"))
        };
        {
            let m = m.clone();
            threads.push(spawn(
                "pseudowires",
                Box::new(move || {
                    while !m.shared.stop.load(Ordering::Relaxed) {
                        std::thread::sleep(MAINTAIN_EVERY);
                        m.maintain();
                    }
                }),
            )?);
        }
        if let Some(path) = socket {
            let fd = listen(&path).map_err(|e| format!("pseudowire socket {path:?}: {e}"))?;
            let m = m.clone();
            threads.push(spawn("pw-socket", Box::new(move || m.serve(fd, &path)))?);
        }
        Ok(Some(m))
    }

    fn port_up(&self, id: usize) -> bool {
        let t = self.shared.tables.load();
        self.ports
            .get(id)
            .and_then(|&p| t.l2.ports.get(p as usize))
            .is_some_and(|p| p.up)
    }

    /// The transport target toward pseudowire `id`'s remote PE.
    fn transport(&self, id: usize) -> Option<u32> {
        self.fib4.lookup(u32::from(self.cfg[id].neighbor))
    }

    /// Programs or unprograms pseudowire `id` as its labels, circuit and
    /// transport say; returns why it is down (`None`: up).
    fn program(&self, id: usize, st: &mut PwStatus) -> Option<String> {
        let w = &self.cfg[id];
        let why = (|| {
            let l = st.labels.ok_or("no labels from LDP")?;
            if !self.port_up(id) {
                return Err("attachment circuit port down");
            }
            let t = self.transport(id).ok_or("no route to the remote PE")?;
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
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        for (id, st) in s.iter_mut().enumerate() {
            if let Some(r) = self.program(id, st) {
                if r != st.reason {
                    tracing::info!(pseudowire = %self.cfg[id].name, "down: {r}");
                }
                st.reason = r;
            } else if let Some(t) = st.transport {
                self.resolve_next_hop(id, t);
            }
            if self.cfg[id].static_labels.is_none() {
                self.tell_zebra(id, st);
            }
        }
    }

    /// Could pseudowire `id` forward if zebra installed it now: programmed
    /// already (labels kept from a refused install), or, after an
    /// uninstall, its circuit up and the remote PE routed.
    fn ready(&self, id: usize, st: &PwStatus) -> bool {
        if st.labels.is_some() {
            st.up
        } else {
            self.port_up(id) && self.transport(id).is_some()
        }
    }

    /// Pushes a signalled pseudowire's change since zebra's last install
    /// to the module's status connection: down after `ok`, or ready
    /// after a refusal (so zebra retries now, not in 30 s).
    fn tell_zebra(&self, id: usize, st: &mut PwStatus) {
        let w = &self.cfg[id];
        let line = if st.zebra_ok && !st.up {
            st.zebra_ok = false;
            st.retry_asked = false;
            format!(
                "v=1 op=pw-status ifname={} vrf=0 status=down reason={}\n",
                w.ifname(),
                st.reason.replace(' ', "_")
            )
        } else if !st.zebra_ok && !st.retry_asked && st.signalled.is_some() && self.ready(id, st) {
            st.retry_asked = true;
            format!("v=1 op=pw-status ifname={} vrf=0 status=up\n", w.ifname())
        } else {
            return;
        };
        let mut c = self.status_conn.lock().unwrap_or_else(|e| e.into_inner());
        let Some(fd) = c.as_ref() else {
            return;
        };
        // SAFETY: sending from our own buffer on our own descriptor; never
        // blocks (a full socket drops the connection: zebra's 30 s retry
        // remains).
        let sent = unsafe {
            libc::send(
                fd.as_raw_fd(),
                line.as_ptr().cast(),
                line.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
        if sent < 0 {
            tracing::warn!(
                "pseudowire status connection lost: {}",
                std::io::Error::last_os_error()
            );
            *c = None;
        } else {
            self.pushed.fetch_add(1, Ordering::Relaxed);
            tracing::info!(pseudowire = %w.name, "told zebra: {}", line.trim_end());
        }
    }

    /// The data path sends a pseudowire's frames only to a next hop whose
    /// MAC is known; when it is not, a datagram to it (discard port, at
    /// most once a second) makes the kernel behind the TAP twin resolve
    /// it, and the neighbour mirror brings the MAC to the data path.
    fn resolve_next_hop(&self, id: usize, target: u32) {
        let Some(r) = self.lfib.resolve(&self.nexthops, target, 0) else {
            return;
        };
        let gw = r
            .next_hop
            .gateway
            .unwrap_or(IpAddr::V4(self.cfg[id].neighbor));
        let known = self.shared.l3.load().as_ref().is_some_and(|l3| {
            l3.neighbors
                .lookup(gw)
                .is_some_and(|n| n.state != NeighborState::Incomplete)
        });
        if known {
            return;
        }
        let mut p = self.poked.lock().unwrap_or_else(|e| e.into_inner());
        if p[id].is_some_and(|t| t.elapsed() < Duration::from_secs(1)) {
            return;
        }
        p[id] = Some(Instant::now());
        let any: IpAddr = if gw.is_ipv4() {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        };
        if let Ok(s) = std::net::UdpSocket::bind((any, 0)) {
            let _ = s.send_to(&[0], (gw, 9));
        }
    }

    /// Handles one side-channel line; the answer to send back.
    pub fn handle_line(&self, line: &str) -> String {
        let msg = match PwMessage::parse(line) {
            Ok(m) => m,
            Err(e) => return format!("err malformed: {e}"),
        };
        let Some(id) = self.find(&msg) else {
            return format!(
                "err no attachment circuit for l2vpn {} pw-id {} (not in pseudowires:)",
                msg.vpn.as_deref().unwrap_or("-"),
                msg.pw_id
            );
        };
        let w = &self.cfg[id];
        let mut s = self.status.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut s[id];
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
                match self.program(id, st) {
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

    /// The configured pseudowire a zebra message is about: by l2vpn name
    /// (and pw-id when zebra gives one); by interface name only when the
    /// message names no l2vpn.
    fn find(&self, msg: &PwMessage) -> Option<usize> {
        match msg.vpn.as_deref() {
            Some(v) => self
                .cfg
                .iter()
                .position(|w| w.name == v && (msg.pw_id == 0 || w.pw_id == msg.pw_id)),
            None => self.cfg.iter().position(|w| w.ifname() == msg.ifname),
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
