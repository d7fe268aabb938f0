//! Cable diagnostics through the kernel's ethtool netlink interface
//! (`ETHTOOL_MSG_CABLE_TEST_ACT`, include/uapi/linux/ethtool_netlink.h):
//! the PHY tests each twisted pair and the kernel multicasts the result
//! as `ETHTOOL_MSG_CABLE_TEST_NTF` on the "monitor" group. Interfaces
//! without a PHY driver that offers it (veth, TAP, most virtual NICs)
//! answer `EOPNOTSUPP`, reported as [`CableError::NotSupported`].
//!
//! The raw TDR mode (`ETHTOOL_MSG_CABLE_TEST_TDR_ACT`) asks the PHY for
//! the reflection's amplitude at each distance instead of a verdict;
//! its trace arrives as `ETHTOOL_MSG_CABLE_TEST_TDR_NTF` ([`tdr`]).
//!
//! The link goes down for the test's duration (a few seconds).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

// Generic netlink controller (linux/genetlink.h).
const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const CTRL_ATTR_MCAST_GROUPS: u16 = 7;
const CTRL_ATTR_MCAST_GRP_NAME: u16 = 1;
const CTRL_ATTR_MCAST_GRP_ID: u16 = 2;

// ethtool netlink (linux/ethtool_netlink.h).
const ETHTOOL_MSG_CABLE_TEST_ACT: u8 = 26;
/// Kernel-to-user message id of the cable-test notification.
pub const ETHTOOL_MSG_CABLE_TEST_NTF: u8 = 27;
const ETHTOOL_A_HEADER_DEV_NAME: u16 = 2;
const ETHTOOL_A_CABLE_TEST_HEADER: u16 = 1;
const ETHTOOL_A_CABLE_TEST_NTF_HEADER: u16 = 1;
const ETHTOOL_A_CABLE_TEST_NTF_STATUS: u16 = 2;
const ETHTOOL_A_CABLE_TEST_NTF_NEST: u16 = 3;
const ETHTOOL_A_CABLE_NEST_RESULT: u16 = 1;
const ETHTOOL_A_CABLE_NEST_FAULT_LENGTH: u16 = 2;
const ETHTOOL_A_CABLE_RESULT_PAIR: u16 = 1;
const ETHTOOL_A_CABLE_RESULT_CODE: u16 = 2;
const ETHTOOL_A_CABLE_FAULT_LENGTH_PAIR: u16 = 1;
const ETHTOOL_A_CABLE_FAULT_LENGTH_CM: u16 = 2;
const STATUS_COMPLETED: u8 = 2;
const ETHTOOL_MSG_CABLE_TEST_TDR_ACT: u8 = 27;
/// Kernel-to-user message id of the TDR notification.
pub const ETHTOOL_MSG_CABLE_TEST_TDR_NTF: u8 = 28;
const ETHTOOL_A_CABLE_TEST_TDR_HEADER: u16 = 1;
const ETHTOOL_A_CABLE_TEST_TDR_CFG: u16 = 2;
const ETHTOOL_A_CABLE_TEST_TDR_CFG_FIRST: u16 = 1;
const ETHTOOL_A_CABLE_TEST_TDR_CFG_LAST: u16 = 2;
const ETHTOOL_A_CABLE_TEST_TDR_CFG_STEP: u16 = 3;
const ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR: u16 = 4;
const ETHTOOL_A_CABLE_TEST_TDR_NTF_HEADER: u16 = 1;
const ETHTOOL_A_CABLE_TEST_TDR_NTF_STATUS: u16 = 2;
const ETHTOOL_A_CABLE_TEST_TDR_NTF_NEST: u16 = 3;
const ETHTOOL_A_CABLE_TDR_NEST_STEP: u16 = 1;
const ETHTOOL_A_CABLE_TDR_NEST_AMPLITUDE: u16 = 2;
const ETHTOOL_A_CABLE_TDR_NEST_PULSE: u16 = 3;
const ETHTOOL_A_CABLE_STEP_FIRST_DISTANCE: u16 = 1;
const ETHTOOL_A_CABLE_STEP_LAST_DISTANCE: u16 = 2;
const ETHTOOL_A_CABLE_STEP_STEP_DISTANCE: u16 = 3;
const ETHTOOL_A_CABLE_AMPLITUDE_PAIR: u16 = 1;
const ETHTOOL_A_CABLE_AMPLITUDE_MV: u16 = 2;
const ETHTOOL_A_CABLE_PULSE_MV: u16 = 1;
/// The kernel refuses TDR distances beyond 150 m (`MAX_CABLE_LENGTH_CM`).
pub const TDR_MAX_CM: u32 = 150 * 100;

const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_F_NESTED: u16 = 1 << 15;
const NLA_TYPE_MASK: u16 = !(1 << 15 | 1 << 14);

/// What the PHY found on one pair (`ETHTOOL_A_CABLE_RESULT_CODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairStatus {
    Ok,
    Open,
    /// Short within the pair.
    SameShort,
    /// Short to another pair.
    CrossShort,
    ImpedanceMismatch,
    Noise,
    ResolutionNotPossible,
    Unspecified,
    /// A code newer than this build.
    Other(u8),
}

impl PairStatus {
    fn from_code(c: u8) -> PairStatus {
        match c {
            0 => PairStatus::Unspecified,
            1 => PairStatus::Ok,
            2 => PairStatus::Open,
            3 => PairStatus::SameShort,
            4 => PairStatus::CrossShort,
            5 => PairStatus::ImpedanceMismatch,
            6 => PairStatus::Noise,
            7 => PairStatus::ResolutionNotPossible,
            c => PairStatus::Other(c),
        }
    }

    /// Lower-case words, as `show` prints them.
    pub fn as_str(&self) -> String {
        match self {
            PairStatus::Ok => "ok".into(),
            PairStatus::Open => "open".into(),
            PairStatus::SameShort => "short".into(),
            PairStatus::CrossShort => "cross-pair short".into(),
            PairStatus::ImpedanceMismatch => "impedance mismatch".into(),
            PairStatus::Noise => "noise".into(),
            PairStatus::ResolutionNotPossible => "cannot resolve".into(),
            PairStatus::Unspecified => "unknown".into(),
            PairStatus::Other(c) => format!("code {c}"),
        }
    }
}

/// One pair's result: status and, where the PHY measured one, the
/// distance to the fault in centimetres.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PairResult {
    /// 0 = pair A … 3 = pair D.
    pub pair: u8,
    pub status: Option<PairStatus>,
    pub fault_cm: Option<u32>,
}

impl PairResult {
    /// "A".."D" (or the number for a pair beyond D).
    pub fn pair_name(&self) -> String {
        match self.pair {
            p @ 0..=3 => char::from(b'A' + p).to_string(),
            p => p.to_string(),
        }
    }
}

/// A decoded `ETHTOOL_MSG_CABLE_TEST_NTF`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notification {
    pub dev: Option<String>,
    /// True for the final notification (the one with results).
    pub completed: bool,
    pub pairs: Vec<PairResult>,
}

/// Why a test gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CableError {
    /// The interface's driver has no cable test (veth, TAP, …).
    NotSupported,
    NoSuchInterface,
    /// Another test is running, or the interface is administratively down.
    Busy(String),
    /// The kernel has no ethtool netlink family.
    NoEthtoolNetlink,
    Timeout,
    Kernel(String),
}

impl std::fmt::Display for CableError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CableError::NotSupported => {
                f.write_str("cable diagnostics not supported by this interface's driver")
            }
            CableError::NoSuchInterface => f.write_str("no such interface"),
            CableError::Busy(m) => write!(f, "interface busy: {m}"),
            CableError::NoEthtoolNetlink => {
                f.write_str("the kernel has no ethtool netlink interface")
            }
            CableError::Timeout => f.write_str("no result from the PHY in time"),
            CableError::Kernel(m) => f.write_str(m),
        }
    }
}

/// A malformed netlink message (never a panic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeError(pub &'static str);

/// Iterates the attributes in `b`: (type without flags, payload).
fn attrs(mut b: &[u8]) -> impl Iterator<Item = Result<(u16, &[u8]), DecodeError>> {
    std::iter::from_fn(move || {
        if b.len() < 4 {
            return None;
        }
        let len = usize::from(u16::from_ne_bytes([b[0], b[1]]));
        let ty = u16::from_ne_bytes([b[2], b[3]]) & NLA_TYPE_MASK;
        if len < 4 || len > b.len() {
            b = &[];
            return Some(Err(DecodeError("attribute length")));
        }
        let payload = &b[4..len];
        b = &b[((len + 3) & !3).min(b.len())..];
        Some(Ok((ty, payload)))
    })
}

fn u8_of(p: &[u8]) -> Result<u8, DecodeError> {
    p.first().copied().ok_or(DecodeError("u8 attribute"))
}

fn u32_of(p: &[u8]) -> Result<u32, DecodeError> {
    p.get(..4)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or(DecodeError("u32 attribute"))
}

fn string_of(p: &[u8]) -> String {
    let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
    String::from_utf8_lossy(&p[..end]).into_owned()
}

/// Decodes the attributes of a cable-test notification (what follows the
/// 4-byte generic netlink header).
pub fn decode_notification(body: &[u8]) -> Result<Notification, DecodeError> {
    let mut n = Notification {
        dev: None,
        completed: false,
        pairs: Vec::new(),
    };
    let pair_entry = |pairs: &mut Vec<PairResult>, pair: u8| -> usize {
        match pairs.iter().position(|p| p.pair == pair) {
            Some(i) => i,
            None => {
                pairs.push(PairResult {
                    pair,
                    status: None,
                    fault_cm: None,
                });
                pairs.len() - 1
            }
        }
    };
    for a in attrs(body) {
        let (ty, p) = a?;
        match ty {
            ETHTOOL_A_CABLE_TEST_NTF_HEADER => {
                for h in attrs(p) {
                    let (hty, hp) = h?;
                    if hty == ETHTOOL_A_HEADER_DEV_NAME {
                        n.dev = Some(string_of(hp));
                    }
                }
            }
            ETHTOOL_A_CABLE_TEST_NTF_STATUS => n.completed = u8_of(p)? == STATUS_COMPLETED,
            ETHTOOL_A_CABLE_TEST_NTF_NEST => {
                for r in attrs(p) {
                    let (rty, rp) = r?;
                    let (mut pair, mut code, mut cm) = (None, None, None);
                    for f in attrs(rp) {
                        let (fty, fp) = f?;
                        match (rty, fty) {
                            (ETHTOOL_A_CABLE_NEST_RESULT, ETHTOOL_A_CABLE_RESULT_PAIR)
                            | (
                                ETHTOOL_A_CABLE_NEST_FAULT_LENGTH,
                                ETHTOOL_A_CABLE_FAULT_LENGTH_PAIR,
                            ) => pair = Some(u8_of(fp)?),
                            (ETHTOOL_A_CABLE_NEST_RESULT, ETHTOOL_A_CABLE_RESULT_CODE) => {
                                code = Some(u8_of(fp)?)
                            }
                            (
                                ETHTOOL_A_CABLE_NEST_FAULT_LENGTH,
                                ETHTOOL_A_CABLE_FAULT_LENGTH_CM,
                            ) => cm = Some(u32_of(fp)?),
                            _ => {}
                        }
                    }
                    let Some(pair) = pair else {
                        continue;
                    };
                    let i = pair_entry(&mut n.pairs, pair);
                    if let Some(c) = code {
                        n.pairs[i].status = Some(PairStatus::from_code(c));
                    }
                    if cm.is_some() {
                        n.pairs[i].fault_cm = cm;
                    }
                }
            }
            _ => {}
        }
    }
    n.pairs.sort_by_key(|p| p.pair);
    Ok(n)
}

/// What to ask of a raw TDR test; `None` leaves the PHY's default
/// (the kernel's: 1 m to 100 m in 1 m steps, every pair).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TdrConfig {
    pub first_cm: Option<u32>,
    pub last_cm: Option<u32>,
    pub step_cm: Option<u32>,
    /// 0 = pair A … 3 = pair D.
    pub pair: Option<u8>,
}

impl TdrConfig {
    /// Refuses what the kernel would refuse, with the reason in words.
    pub fn check(&self) -> Result<(), String> {
        for (what, v) in [("from", self.first_cm), ("to", self.last_cm)] {
            if v.is_some_and(|cm| cm > TDR_MAX_CM) {
                return Err(format!("TDR {what}: at most {} m", TDR_MAX_CM / 100));
            }
        }
        if let (Some(a), Some(b)) = (self.first_cm, self.last_cm) {
            if a > b {
                return Err("TDR: from is beyond to".into());
            }
        }
        if self.step_cm == Some(0) {
            return Err("TDR step: must be more than 0".into());
        }
        if self.pair.is_some_and(|p| p > 3) {
            return Err("TDR pair: A to D".into());
        }
        Ok(())
    }
}

/// One point of a TDR trace: the reflection on `pair` at `distance_cm`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TdrSample {
    pub pair: u8,
    pub distance_cm: u32,
    pub mv: i16,
}

/// A decoded `ETHTOOL_MSG_CABLE_TEST_TDR_NTF`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TdrTrace {
    pub dev: Option<String>,
    pub completed: bool,
    /// The amplitude of the pulse sent, when the PHY says it.
    pub pulse_mv: Option<i16>,
    /// (first, last, step) in cm, as the PHY used them.
    pub steps: Option<(u32, u32, u32)>,
    /// In the order the PHY reported them.
    pub samples: Vec<TdrSample>,
}

fn i16_of(p: &[u8]) -> Result<i16, DecodeError> {
    p.get(..2)
        .map(|b| i16::from_ne_bytes([b[0], b[1]]))
        .ok_or(DecodeError("s16 attribute"))
}

/// Decodes a TDR notification (what follows the generic netlink header).
///
/// The kernel documents a step nest (first, last, step distance) before
/// the amplitudes, one amplitude nest per pair and step: the n-th
/// amplitude of a pair after a step nest lies at `first + n × step`.
/// PHYs that report each distance as its own step nest (`first == last`)
/// decode the same way.
pub fn decode_tdr_notification(body: &[u8]) -> Result<TdrTrace, DecodeError> {
    let mut t = TdrTrace::default();
    // Distance of the next amplitude per pair, from the last step nest.
    let mut base = (0u32, 0u32);
    let mut seen = [0u32; 256];
    for a in attrs(body) {
        let (ty, p) = a?;
        match ty {
            ETHTOOL_A_CABLE_TEST_TDR_NTF_HEADER => {
                for h in attrs(p) {
                    let (hty, hp) = h?;
                    if hty == ETHTOOL_A_HEADER_DEV_NAME {
                        t.dev = Some(string_of(hp));
                    }
                }
            }
            ETHTOOL_A_CABLE_TEST_TDR_NTF_STATUS => t.completed = u8_of(p)? == STATUS_COMPLETED,
            ETHTOOL_A_CABLE_TEST_TDR_NTF_NEST => {
                for r in attrs(p) {
                    let (rty, rp) = r?;
                    match rty {
                        ETHTOOL_A_CABLE_TDR_NEST_PULSE => {
                            for f in attrs(rp) {
                                let (fty, fp) = f?;
                                if fty == ETHTOOL_A_CABLE_PULSE_MV {
                                    t.pulse_mv = Some(i16_of(fp)?);
                                }
                            }
                        }
                        ETHTOOL_A_CABLE_TDR_NEST_STEP => {
                            let (mut first, mut last, mut step) = (0, 0, 0);
                            for f in attrs(rp) {
                                let (fty, fp) = f?;
                                match fty {
                                    ETHTOOL_A_CABLE_STEP_FIRST_DISTANCE => first = u32_of(fp)?,
                                    ETHTOOL_A_CABLE_STEP_LAST_DISTANCE => last = u32_of(fp)?,
                                    ETHTOOL_A_CABLE_STEP_STEP_DISTANCE => step = u32_of(fp)?,
                                    _ => {}
                                }
                            }
                            base = (first, step);
                            seen = [0; 256];
                            match &mut t.steps {
                                // Per-distance step nests: the trace's range.
                                Some(s) => {
                                    s.0 = s.0.min(first);
                                    s.1 = s.1.max(last);
                                }
                                None => t.steps = Some((first, last, step)),
                            }
                        }
                        ETHTOOL_A_CABLE_TDR_NEST_AMPLITUDE => {
                            let (mut pair, mut mv) = (None, None);
                            for f in attrs(rp) {
                                let (fty, fp) = f?;
                                match fty {
                                    ETHTOOL_A_CABLE_AMPLITUDE_PAIR => pair = Some(u8_of(fp)?),
                                    ETHTOOL_A_CABLE_AMPLITUDE_MV => mv = Some(i16_of(fp)?),
                                    _ => {}
                                }
                            }
                            let (Some(pair), Some(mv)) = (pair, mv) else {
                                continue;
                            };
                            let n = &mut seen[usize::from(pair)];
                            let distance_cm = base.0.saturating_add(n.saturating_mul(base.1));
                            *n = n.saturating_add(1);
                            t.samples.push(TdrSample {
                                pair,
                                distance_cm,
                                mv,
                            });
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(t)
}

/// Appends one attribute (padded to 4 bytes).
pub fn put_attr(buf: &mut Vec<u8>, ty: u16, payload: &[u8]) {
    let len = 4 + payload.len();
    buf.extend_from_slice(&(len as u16).to_ne_bytes());
    buf.extend_from_slice(&ty.to_ne_bytes());
    buf.extend_from_slice(payload);
    buf.resize((buf.len() + 3) & !3, 0);
}

/// Appends a nested attribute whose payload `inner` builds.
pub fn put_nested(buf: &mut Vec<u8>, ty: u16, inner: impl FnOnce(&mut Vec<u8>)) {
    let mut b = Vec::new();
    inner(&mut b);
    put_attr(buf, ty | NLA_F_NESTED, &b);
}

/// A netlink message: header, generic netlink header (`cmd`, version 1),
/// then `attrs`.
fn message(ty: u16, flags: u16, seq: u32, cmd: u8, attrs: &[u8]) -> Vec<u8> {
    let len = 16 + 4 + attrs.len();
    let mut m = Vec::with_capacity(len);
    m.extend_from_slice(&(len as u32).to_ne_bytes());
    m.extend_from_slice(&ty.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&seq.to_ne_bytes());
    m.extend_from_slice(&0u32.to_ne_bytes());
    m.extend_from_slice(&[cmd, 1, 0, 0]);
    m.extend_from_slice(attrs);
    m
}

/// Splits a datagram into (type, seq, payload after the 16-byte header).
fn messages(mut b: &[u8]) -> impl Iterator<Item = Result<(u16, u32, &[u8]), DecodeError>> {
    std::iter::from_fn(move || {
        if b.len() < 16 {
            return None;
        }
        let len = u32::from_ne_bytes([b[0], b[1], b[2], b[3]]) as usize;
        if len < 16 || len > b.len() {
            b = &[];
            return Some(Err(DecodeError("message length")));
        }
        let ty = u16::from_ne_bytes([b[4], b[5]]);
        let seq = u32::from_ne_bytes([b[8], b[9], b[10], b[11]]);
        let body = &b[16..len];
        b = &b[((len + 3) & !3).min(b.len())..];
        Some(Ok((ty, seq, body)))
    })
}

/// A generic netlink socket, closed on drop.
struct GenlSocket {
    fd: OwnedFd,
}

impl GenlSocket {
    fn open() -> Result<GenlSocket, CableError> {
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        if fd < 0 {
            return Err(CableError::Kernel(format!(
                "netlink socket: {}",
                std::io::Error::last_os_error()
            )));
        }
        // SAFETY: a fresh descriptor nothing else owns.
        Ok(GenlSocket {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    fn send(&self, m: &[u8]) -> Result<(), CableError> {
        // SAFETY: m is a valid buffer of m.len() bytes; the kernel is the
        // default destination of an unbound netlink socket's send.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), m.as_ptr().cast(), m.len(), 0) };
        if r < 0 {
            return Err(CableError::Kernel(format!(
                "netlink send: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }

    /// One datagram, or `None` once `deadline` passes.
    fn recv(&self, buf: &mut [u8], deadline: Instant) -> Result<Option<usize>, CableError> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = left.as_millis().clamp(1, 1000) as libc::c_int;
            // SAFETY: one valid pollfd.
            let r = unsafe { libc::poll(&mut pfd, 1, ms) };
            if r <= 0 {
                continue;
            }
            // SAFETY: buf is valid for buf.len() bytes.
            let n =
                unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(CableError::Kernel(format!("netlink receive: {e}")));
            }
            return Ok(Some(n as usize));
        }
    }

    fn join(&self, group: u32) -> Result<(), CableError> {
        // SAFETY: setsockopt with a u32 option value.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_NETLINK,
                libc::NETLINK_ADD_MEMBERSHIP,
                (&group as *const u32).cast(),
                4,
            )
        };
        if r < 0 {
            return Err(CableError::Kernel(format!(
                "join ethtool monitor group: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(())
    }
}

/// The ethtool family's id and its "monitor" multicast group.
fn resolve_ethtool(s: &GenlSocket) -> Result<(u16, u32), CableError> {
    let mut a = Vec::new();
    put_attr(&mut a, CTRL_ATTR_FAMILY_NAME, b"ethtool\0");
    s.send(&message(
        GENL_ID_CTRL,
        NLM_F_REQUEST,
        1,
        CTRL_CMD_GETFAMILY,
        &a,
    ))?;
    let mut buf = vec![0u8; 16384];
    let deadline = Instant::now() + Duration::from_secs(2);
    while let Some(n) = s.recv(&mut buf, deadline)? {
        for m in messages(&buf[..n]) {
            let (ty, _, body) = m.map_err(|e| CableError::Kernel(e.0.into()))?;
            if ty == NLMSG_ERROR {
                let code = body
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                if code != 0 {
                    return Err(CableError::NoEthtoolNetlink);
                }
                continue;
            }
            if ty != GENL_ID_CTRL || body.len() < 4 {
                continue;
            }
            let (mut id, mut group) = (None, None);
            for at in attrs(&body[4..]) {
                let (aty, p) = at.map_err(|e| CableError::Kernel(e.0.into()))?;
                match aty {
                    CTRL_ATTR_FAMILY_ID => {
                        id = p.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]))
                    }
                    CTRL_ATTR_MCAST_GROUPS => {
                        for g in attrs(p).flatten() {
                            let (mut name, mut gid) = (String::new(), None);
                            for f in attrs(g.1).flatten() {
                                match f.0 {
                                    CTRL_ATTR_MCAST_GRP_NAME => name = string_of(f.1),
                                    CTRL_ATTR_MCAST_GRP_ID => gid = u32_of(f.1).ok(),
                                    _ => {}
                                }
                            }
                            if name == "monitor" {
                                group = gid;
                            }
                        }
                    }
                    _ => {}
                }
            }
            if let (Some(id), Some(g)) = (id, group) {
                return Ok((id, g));
            }
            return Err(CableError::NoEthtoolNetlink);
        }
    }
    Err(CableError::NoEthtoolNetlink)
}

/// Runs the PHY's cable test on `ifname` (in the caller's network
/// namespace) and waits up to `timeout` for its result.
pub fn test(ifname: &str, timeout: Duration) -> Result<Vec<PairResult>, CableError> {
    let mut a = Vec::new();
    put_nested(&mut a, ETHTOOL_A_CABLE_TEST_HEADER, |h| dev_name(h, ifname));
    run(
        ETHTOOL_MSG_CABLE_TEST_ACT,
        &a,
        ETHTOOL_MSG_CABLE_TEST_NTF,
        timeout,
        |b| {
            let n = decode_notification(b).ok()?;
            (n.dev.as_deref() == Some(ifname) && n.completed).then_some(n.pairs)
        },
    )
}

/// Runs the PHY's raw TDR test on `ifname` and waits up to `timeout`
/// for its trace.
pub fn tdr(ifname: &str, cfg: &TdrConfig, timeout: Duration) -> Result<TdrTrace, CableError> {
    cfg.check().map_err(CableError::Kernel)?;
    let mut a = Vec::new();
    put_nested(&mut a, ETHTOOL_A_CABLE_TEST_TDR_HEADER, |h| {
        dev_name(h, ifname)
    });
    if *cfg != TdrConfig::default() {
        put_nested(&mut a, ETHTOOL_A_CABLE_TEST_TDR_CFG, |c| {
            for (ty, v) in [
                (ETHTOOL_A_CABLE_TEST_TDR_CFG_FIRST, cfg.first_cm),
                (ETHTOOL_A_CABLE_TEST_TDR_CFG_LAST, cfg.last_cm),
                (ETHTOOL_A_CABLE_TEST_TDR_CFG_STEP, cfg.step_cm),
            ] {
                if let Some(v) = v {
                    put_attr(c, ty, &v.to_ne_bytes());
                }
            }
            if let Some(p) = cfg.pair {
                put_attr(c, ETHTOOL_A_CABLE_TEST_TDR_CFG_PAIR, &[p]);
            }
        });
    }
    run(
        ETHTOOL_MSG_CABLE_TEST_TDR_ACT,
        &a,
        ETHTOOL_MSG_CABLE_TEST_TDR_NTF,
        timeout,
        |b| {
            let t = decode_tdr_notification(b).ok()?;
            (t.dev.as_deref() == Some(ifname) && t.completed).then_some(t)
        },
    )
}

fn dev_name(h: &mut Vec<u8>, ifname: &str) {
    let mut name = ifname.as_bytes().to_vec();
    name.push(0);
    put_attr(h, ETHTOOL_A_HEADER_DEV_NAME, &name);
}

/// Sends action `cmd` with `attrs`, then waits for the notification
/// `ntf` that `done` accepts (it sees the attributes after the generic
/// netlink header; other devices' and interim notifications give `None`).
fn run<T>(
    cmd: u8,
    attrs: &[u8],
    ntf: u8,
    timeout: Duration,
    done: impl Fn(&[u8]) -> Option<T>,
) -> Result<T, CableError> {
    let s = GenlSocket::open()?;
    let (family, monitor) = resolve_ethtool(&s)?;
    // Join before asking, so the notification cannot be missed.
    s.join(monitor)?;
    const SEQ: u32 = 2;
    s.send(&message(family, NLM_F_REQUEST | NLM_F_ACK, SEQ, cmd, attrs))?;
    let mut buf = vec![0u8; 65536];
    let deadline = Instant::now() + timeout;
    while let Some(n) = s.recv(&mut buf, deadline)? {
        for m in messages(&buf[..n]) {
            let (ty, seq, body) = m.map_err(|e| CableError::Kernel(e.0.into()))?;
            if ty == NLMSG_ERROR && seq == SEQ {
                let code = body
                    .get(..4)
                    .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                match -code {
                    0 => {}
                    libc::EOPNOTSUPP => return Err(CableError::NotSupported),
                    libc::ENODEV => return Err(CableError::NoSuchInterface),
                    libc::EBUSY | libc::ENETDOWN => {
                        return Err(CableError::Busy(
                            std::io::Error::from_raw_os_error(-code).to_string(),
                        ))
                    }
                    e => {
                        return Err(CableError::Kernel(format!(
                            "cable test: {}",
                            std::io::Error::from_raw_os_error(e)
                        )))
                    }
                }
                continue;
            }
            if ty != family || body.len() < 4 || body[0] != ntf {
                continue;
            }
            if let Some(r) = done(&body[4..]) {
                return Ok(r);
            }
        }
    }
    Err(CableError::Timeout)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATUS_STARTED: u8 = 1;

    /// A notification as the kernel builds it (ethnl_cable_test_*):
    /// header nest with the device name, status, then a nest of result
    /// and fault-length nests.
    fn ntf(dev: &str, status: u8, results: &[(u8, u8)], faults: &[(u8, u32)]) -> Vec<u8> {
        let mut b = Vec::new();
        put_nested(&mut b, ETHTOOL_A_CABLE_TEST_NTF_HEADER, |h| {
            let mut n = dev.as_bytes().to_vec();
            n.push(0);
            put_attr(h, ETHTOOL_A_HEADER_DEV_NAME, &n);
        });
        put_attr(&mut b, ETHTOOL_A_CABLE_TEST_NTF_STATUS, &[status]);
        if status == STATUS_COMPLETED {
            put_nested(&mut b, ETHTOOL_A_CABLE_TEST_NTF_NEST, |n| {
                for &(pair, code) in results {
                    put_nested(n, ETHTOOL_A_CABLE_NEST_RESULT, |r| {
                        put_attr(r, ETHTOOL_A_CABLE_RESULT_PAIR, &[pair]);
                        put_attr(r, ETHTOOL_A_CABLE_RESULT_CODE, &[code]);
                    });
                }
                for &(pair, cm) in faults {
                    put_nested(n, ETHTOOL_A_CABLE_NEST_FAULT_LENGTH, |r| {
                        put_attr(r, ETHTOOL_A_CABLE_FAULT_LENGTH_PAIR, &[pair]);
                        put_attr(r, ETHTOOL_A_CABLE_FAULT_LENGTH_CM, &cm.to_ne_bytes());
                    });
                }
            });
        }
        b
    }

    #[test]
    fn completed_notification_with_faults() {
        let b = ntf(
            "eth3",
            STATUS_COMPLETED,
            &[(0, 1), (1, 2), (2, 3), (3, 4)],
            &[(1, 1240), (2, 310)],
        );
        let n = decode_notification(&b).unwrap();
        assert_eq!(n.dev.as_deref(), Some("eth3"));
        assert!(n.completed);
        let got: Vec<_> = n
            .pairs
            .iter()
            .map(|p| (p.pair_name(), p.status.unwrap().as_str(), p.fault_cm))
            .collect();
        assert_eq!(
            got,
            vec![
                ("A".into(), "ok".to_string(), None),
                ("B".into(), "open".to_string(), Some(1240)),
                ("C".into(), "short".to_string(), Some(310)),
                ("D".into(), "cross-pair short".to_string(), None),
            ]
        );
    }

    #[test]
    fn started_notification_has_no_results() {
        let n = decode_notification(&ntf("eth0", STATUS_STARTED, &[], &[])).unwrap();
        assert!(!n.completed);
        assert!(n.pairs.is_empty());
    }

    #[test]
    fn newer_codes_and_unknown_attributes_are_kept_or_skipped() {
        let mut b = ntf("p1", STATUS_COMPLETED, &[(0, 5), (1, 9)], &[]);
        put_attr(&mut b, 99, &[1, 2, 3]);
        let n = decode_notification(&b).unwrap();
        assert_eq!(n.pairs[0].status, Some(PairStatus::ImpedanceMismatch));
        assert_eq!(n.pairs[1].status, Some(PairStatus::Other(9)));
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error_or_a_result() {
        let b = ntf("eth3", STATUS_COMPLETED, &[(0, 1), (1, 2)], &[(1, 1240)]);
        for cut in 0..b.len() {
            let _ = decode_notification(&b[..cut]);
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut m = b.clone();
                m[i] ^= 1 << bit;
                let _ = decode_notification(&m);
            }
        }
        // A length field that runs past the end is refused.
        let mut m = b.clone();
        m[0] = 0xff;
        assert!(decode_notification(&m).is_err());
    }

    /// A step nest (first, last, step cm) and the amplitudes (pair, mV)
    /// that follow it.
    type Step<'a> = ((u32, u32, u32), &'a [(u8, i16)]);

    /// A TDR notification as the kernel builds it (ethnl_cable_test_pulse,
    /// _step, _amplitude).
    fn tdr_ntf(dev: &str, pulse: Option<i16>, steps: &[Step]) -> Vec<u8> {
        let mut b = Vec::new();
        put_nested(&mut b, ETHTOOL_A_CABLE_TEST_TDR_NTF_HEADER, |h| {
            dev_name(h, dev)
        });
        put_attr(
            &mut b,
            ETHTOOL_A_CABLE_TEST_TDR_NTF_STATUS,
            &[STATUS_COMPLETED],
        );
        put_nested(&mut b, ETHTOOL_A_CABLE_TEST_TDR_NTF_NEST, |n| {
            if let Some(mv) = pulse {
                put_nested(n, ETHTOOL_A_CABLE_TDR_NEST_PULSE, |p| {
                    put_attr(p, ETHTOOL_A_CABLE_PULSE_MV, &mv.to_ne_bytes())
                });
            }
            for &((first, last, step), amps) in steps {
                put_nested(n, ETHTOOL_A_CABLE_TDR_NEST_STEP, |s| {
                    put_attr(s, ETHTOOL_A_CABLE_STEP_FIRST_DISTANCE, &first.to_ne_bytes());
                    put_attr(s, ETHTOOL_A_CABLE_STEP_LAST_DISTANCE, &last.to_ne_bytes());
                    put_attr(s, ETHTOOL_A_CABLE_STEP_STEP_DISTANCE, &step.to_ne_bytes());
                });
                for &(pair, mv) in amps {
                    put_nested(n, ETHTOOL_A_CABLE_TDR_NEST_AMPLITUDE, |a| {
                        put_attr(a, ETHTOOL_A_CABLE_AMPLITUDE_PAIR, &[pair]);
                        put_attr(a, ETHTOOL_A_CABLE_AMPLITUDE_MV, &mv.to_ne_bytes());
                    });
                }
            }
        });
        b
    }

    #[test]
    fn tdr_trace_places_each_amplitude_at_its_distance() {
        // One step nest, then the samples of pairs A and B interleaved.
        let b = tdr_ntf(
            "eth3",
            Some(1000),
            &[(
                (100, 300, 100),
                &[(0, 10), (1, -5), (0, 12), (1, -7), (0, 300), (1, 2)],
            )],
        );
        let t = decode_tdr_notification(&b).unwrap();
        assert_eq!(t.dev.as_deref(), Some("eth3"));
        assert!(t.completed);
        assert_eq!(t.pulse_mv, Some(1000));
        assert_eq!(t.steps, Some((100, 300, 100)));
        let got: Vec<_> = t
            .samples
            .iter()
            .map(|s| (s.pair, s.distance_cm, s.mv))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, 100, 10),
                (1, 100, -5),
                (0, 200, 12),
                (1, 200, -7),
                (0, 300, 300),
                (1, 300, 2)
            ]
        );
        // A PHY that gives each distance its own step nest.
        let b = tdr_ntf(
            "eth3",
            None,
            &[((500, 500, 0), &[(2, 40)]), ((600, 600, 0), &[(2, -40)])],
        );
        let t = decode_tdr_notification(&b).unwrap();
        assert_eq!(t.pulse_mv, None);
        assert_eq!(t.steps, Some((500, 600, 0)));
        let got: Vec<_> = t
            .samples
            .iter()
            .map(|s| (s.pair, s.distance_cm, s.mv))
            .collect();
        assert_eq!(got, vec![(2, 500, 40), (2, 600, -40)]);
    }

    #[test]
    fn tdr_truncations_and_byte_flips_never_panic() {
        let b = tdr_ntf("eth3", Some(1000), &[((100, 200, 100), &[(0, 1), (0, 2)])]);
        for cut in 0..b.len() {
            let _ = decode_tdr_notification(&b[..cut]);
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut m = b.clone();
                m[i] ^= 1 << bit;
                let _ = decode_tdr_notification(&m);
            }
        }
        // Saturating distances: a huge step does not overflow.
        let b = tdr_ntf(
            "e",
            None,
            &[((u32::MAX, u32::MAX, u32::MAX), &[(0, 1), (0, 2)])],
        );
        let t = decode_tdr_notification(&b).unwrap();
        assert_eq!(t.samples[1].distance_cm, u32::MAX);
    }

    #[test]
    fn tdr_config_is_checked_as_the_kernel_would() {
        assert!(TdrConfig::default().check().is_ok());
        let c = |f, l, s, p| TdrConfig {
            first_cm: f,
            last_cm: l,
            step_cm: s,
            pair: p,
        };
        assert!(c(Some(100), Some(15_000), Some(100), Some(3))
            .check()
            .is_ok());
        assert!(c(None, Some(15_001), None, None).check().is_err());
        assert!(c(Some(500), Some(100), None, None).check().is_err());
        assert!(c(None, None, Some(0), None).check().is_err());
        assert!(c(None, None, None, Some(4)).check().is_err());
    }

    #[test]
    fn messages_split_and_refuse_bad_lengths() {
        let one = message(30, 0, 7, ETHTOOL_MSG_CABLE_TEST_NTF, &[1, 2, 3, 4]);
        let mut two = one.clone();
        two.extend_from_slice(&one);
        let got: Vec<_> = messages(&two).collect();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].as_ref().unwrap().1, 7);
        let mut bad = one.clone();
        bad[0] = 200;
        assert!(messages(&bad).next().unwrap().is_err());
    }
}
