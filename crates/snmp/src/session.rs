//! The AgentX session with the master agent: open, register the IF-MIB
//! subtrees, answer Get/GetNext/GetBulk, reconnect when snmpd restarts.

use crate::ifmib::{IfMib, IF_NUMBER, IF_TABLE, IF_XTABLE};
use crate::links::{notification, Link, LinkTracker, MasterClock};
use crate::wire::{self, Value as Snmp};
use crate::Query;
use agentx::encodings::ID;
use agentx::pdu::{Close, CloseReason, Get, GetBulk, GetNext, Header, Open, Register, Type};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::wire::HEADER;
/// Largest PDU accepted from the master; a longer length field is a
/// protocol error (the session is closed and reopened).
const MAX_PDU: usize = 1 << 20;
/// GetBulk repetitions answered at most (the master asks per packet).
const MAX_REPETITIONS: usize = 1024;
/// How long one IF-MIB snapshot answers requests: a walk is one request
/// per variable, and the API is asked once per snapshot. Also how often
/// the ports' status is polled for ifLastChange and notifications.
const SNAPSHOT_TTL: Duration = Duration::from_secs(1);
/// snmpd's own IF-MIB registers at the default priority 127; a lower
/// value wins, so the ports shown are Lanyard's, with its counters.
const PRIORITY: u8 = 64;
/// RFC 3416 `notWritable`: Lanyard's IF-MIB is read-only.
const NOT_WRITABLE: u16 = 17;
/// RFC 2741 `genErr` for a request that cannot be answered.
const GEN_ERR: u16 = 5;

fn sub_ids(id: &ID) -> Vec<u32> {
    let s = id.to_string();
    if s.is_empty() {
        return Vec::new();
    }
    s.split('.').filter_map(|p| p.parse().ok()).collect()
}

fn id(o: &[u32]) -> Option<ID> {
    ID::try_from(o.to_vec()).ok()
}

fn in_subtree(o: &[u32]) -> bool {
    [IF_NUMBER, IF_TABLE, IF_XTABLE]
        .iter()
        .any(|t| o.starts_with(t))
}

/// A Response with an error status and no variables (the crate's error
/// enum has no SNMP error codes such as notWritable, genErr).
fn error_response(h: &Header, status: u16, index: u16) -> Vec<u8> {
    wire::response(h, status, index, &[])
}

fn respond(h: &Header, vbs: Vec<Vb>) -> Vec<u8> {
    wire::response(h, 0, 0, &vbs)
}

/// One variable of a Response: its OID and value.
type Vb = (Vec<u32>, Snmp);

fn get_next(mib: &IfMib, start: &[u32], include: bool, end: &[u32]) -> Vb {
    match mib.next(start, include, end) {
        Some((k, v)) => (k.to_vec(), v.clone()),
        None => (start.to_vec(), Snmp::EndOfMibView),
    }
}

/// What a PDU from the master asks of the session.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer {
    /// Send these bytes back.
    Reply(Vec<u8>),
    /// Nothing to send (a Response, CleanupSet, an unknown PDU).
    Nothing,
    /// The master closed the session (or sent garbage): reopen.
    Close,
}

/// Answers one whole PDU (`pdu`: header and payload) from the master with
/// the variables of `mib`. Never panics on any input (fuzzed).
pub fn answer(pdu: &[u8], mib: &IfMib) -> Answer {
    let Ok(h) = Header::from_bytes(pdu) else {
        return Answer::Close;
    };
    // The crate reads the context flag; Lanyard serves the default
    // context only, as snmpd asks for it.
    match h.ty {
        Type::Get => {
            let Ok(g) = Get::from_bytes(pdu) else {
                return Answer::Reply(error_response(&h, GEN_ERR, 0));
            };
            let mut vbs = Vec::new();
            for sr in &g.sr.0 {
                let o = sub_ids(&sr.start);
                let v = match mib.get(&o) {
                    Some(v) => v.clone(),
                    None if in_subtree(&o) => Snmp::NoSuchInstance,
                    None => Snmp::NoSuchObject,
                };
                vbs.push((o, v));
            }
            Answer::Reply(respond(&h, vbs))
        }
        Type::GetNext => {
            let Ok(g) = GetNext::from_bytes(pdu) else {
                return Answer::Reply(error_response(&h, GEN_ERR, 0));
            };
            let mut vbs = Vec::new();
            for sr in &g.sr.0 {
                let (s, e) = (sub_ids(&sr.start), sub_ids(&sr.end));
                vbs.push(get_next(mib, &s, sr.start.include != 0, &e));
            }
            Answer::Reply(respond(&h, vbs))
        }
        Type::GetBulk => {
            let Ok(g) = GetBulk::from_bytes(pdu) else {
                return Answer::Reply(error_response(&h, GEN_ERR, 0));
            };
            // RFC 2741 7.2.3.3: the non-repeaters once, then the
            // repeaters interleaved, each from where it got to.
            let n = (g.non_repeaters as usize).min(g.sr.0.len());
            let mut vbs = Vec::new();
            for sr in &g.sr.0[..n] {
                let (s, e) = (sub_ids(&sr.start), sub_ids(&sr.end));
                vbs.push(get_next(mib, &s, sr.start.include != 0, &e));
            }
            let mut cur: Vec<(Vec<u32>, bool, Vec<u32>, bool)> = g.sr.0[n..]
                .iter()
                .map(|sr| {
                    (
                        sub_ids(&sr.start),
                        sr.start.include != 0,
                        sub_ids(&sr.end),
                        false,
                    )
                })
                .collect();
            for _ in 0..(g.max_repetitions as usize).min(MAX_REPETITIONS) {
                if cur.is_empty() || cur.iter().all(|c| c.3) {
                    break;
                }
                for c in cur.iter_mut() {
                    let vb = if c.3 {
                        (c.0.clone(), Snmp::EndOfMibView)
                    } else {
                        match mib.next(&c.0, c.1, &c.2) {
                            Some((k, v)) => {
                                c.0 = k.to_vec();
                                c.1 = false;
                                (c.0.clone(), v.clone())
                            }
                            None => {
                                c.3 = true;
                                (c.0.clone(), Snmp::EndOfMibView)
                            }
                        }
                    };
                    vbs.push(vb);
                }
            }
            Answer::Reply(respond(&h, vbs))
        }
        Type::TestSet => Answer::Reply(error_response(&h, NOT_WRITABLE, 1)),
        Type::CommitSet | Type::UndoSet => Answer::Reply(error_response(&h, 0, 0)),
        Type::Close => Answer::Close,
        _ => Answer::Nothing,
    }
}

/// The subagent's thread.
pub struct SnmpAgent {
    pub thread: JoinHandle<()>,
}

/// Starts the subagent: connects to the master's AgentX socket (retrying
/// every second while it is absent), registers `ifNumber`, `ifTable`
/// and `ifXTable`, and answers until `stop()`.
pub fn serve(
    socket: PathBuf,
    q: Arc<Query>,
    stop: impl Fn() -> bool + Send + 'static,
) -> std::io::Result<SnmpAgent> {
    let thread = std::thread::Builder::new()
        .name("snmp-agentx".into())
        .spawn(move || {
            let mut warned = false;
            let mut links = LinkTracker::default();
            while !stop() {
                match UnixStream::connect(&socket) {
                    Ok(s) => {
                        warned = false;
                        match session(s, &q, &mut links, &stop) {
                            Ok(()) => tracing::info!("snmp: AgentX session closed"),
                            Err(e) => tracing::warn!("snmp: AgentX session ended: {e}"),
                        }
                    }
                    Err(e) if !warned => {
                        warned = true;
                        tracing::warn!(
                            "snmp: no AgentX master at {}: {e} (retrying every second)",
                            socket.display()
                        );
                    }
                    Err(_) => {}
                }
                for _ in 0..10 {
                    if stop() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })?;
    Ok(SnmpAgent { thread })
}

/// Reads whole PDUs from the master, returning when stop() or on error.
struct Reader {
    s: UnixStream,
    buf: Vec<u8>,
}

impl Reader {
    /// The next whole PDU, or `None` on a read timeout.
    fn next(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        loop {
            if self.buf.len() >= HEADER {
                let f = self.buf[2];
                let l = [self.buf[16], self.buf[17], self.buf[18], self.buf[19]];
                let len = if f & (1 << 4) != 0 {
                    u32::from_be_bytes(l)
                } else {
                    u32::from_le_bytes(l)
                } as usize;
                if len > MAX_PDU {
                    return Err(std::io::Error::new(
                        ErrorKind::InvalidData,
                        format!("PDU of {len} bytes from the master"),
                    ));
                }
                if self.buf.len() >= HEADER + len {
                    let pdu: Vec<u8> = self.buf.drain(..HEADER + len).collect();
                    return Ok(Some(pdu));
                }
            }
            let mut tmp = [0u8; 8192];
            match self.s.read(&mut tmp) {
                Ok(0) => return Err(ErrorKind::UnexpectedEof.into()),
                Ok(n) => self.buf.extend_from_slice(&tmp[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits (up to 5 s) for the Response to `packet_id`.
    fn response(&mut self, packet_id: u32) -> std::io::Result<MasterResponse> {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Some(p) = self.next()? {
                match master_response(&p) {
                    Some(r) if r.header.packet_id == packet_id => return Ok(r),
                    _ => continue,
                }
            }
        }
        Err(std::io::Error::new(
            ErrorKind::TimedOut,
            "no answer from the AgentX master",
        ))
    }
}

/// A Response from the master: header, its sysUpTime and error status.
#[derive(Debug)]
pub struct MasterResponse {
    pub header: Header,
    /// The master's sysUpTime in 1/100 s (RFC 2741 6.2.16).
    pub uptime: u32,
    pub status: u16,
}

/// A Response PDU from the master, or `None` for anything else. Parsed
/// by hand: the crate's Response decoder multiplies sysUpTime in 32 bits
/// (overflows on a master up for over 49 days). Never panics (fuzzed).
pub fn master_response(p: &[u8]) -> Option<MasterResponse> {
    let h = Header::from_bytes(p).ok()?;
    if h.ty != Type::Response || p.len() < HEADER + 8 {
        return None;
    }
    let be = h.flags & (1 << 4) != 0;
    let u = [p[HEADER], p[HEADER + 1], p[HEADER + 2], p[HEADER + 3]];
    let e = [p[HEADER + 4], p[HEADER + 5]];
    let (uptime, status) = if be {
        (u32::from_be_bytes(u), u16::from_be_bytes(e))
    } else {
        (u32::from_le_bytes(u), u16::from_le_bytes(e))
    };
    Some(MasterResponse {
        header: h,
        uptime,
        status,
    })
}

fn session(
    s: UnixStream,
    q: &Arc<Query>,
    links: &mut LinkTracker,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<()> {
    s.set_read_timeout(Some(Duration::from_millis(200)))?;
    let mut w = s.try_clone()?;
    let mut r = Reader { s, buf: Vec::new() };
    let bad = |e: std::io::Error| std::io::Error::new(ErrorKind::InvalidData, e.to_string());

    let mut open = Open::new(
        id(&[1, 3, 6, 1, 2, 1, 31]).expect("short OID"),
        "Lanyard switch ports (IF-MIB)",
    );
    open.timeout = Duration::from_secs(5);
    open.header.packet_id = 1;
    w.write_all(&open.to_bytes().map_err(bad)?)?;
    let opened = r.response(1)?;
    if opened.status != 0 {
        return Err(std::io::Error::other(format!(
            "master refused the session (error {})",
            opened.status
        )));
    }
    let session_id = opened.header.session_id;
    // RFC 2741 7.1.1: the master's Response carries its sysUpTime, the
    // clock ifLastChange is read against.
    let clock = MasterClock {
        at: Instant::now(),
        ticks: opened.uptime,
    };
    let mut pid = 1;
    for t in [IF_NUMBER, IF_TABLE, IF_XTABLE] {
        pid += 1;
        let mut reg = Register::new(id(t).expect("short OID"));
        reg.header.session_id = session_id;
        reg.header.packet_id = pid;
        reg.priority = PRIORITY;
        w.write_all(&reg.to_bytes().map_err(bad)?)?;
        let st = r.response(pid)?.status;
        if st != 0 {
            tracing::warn!(
                "snmp: master refused to register {} (error {st})",
                t.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(".")
            );
        }
    }
    tracing::info!(
        "snmp: AgentX session {session_id} open (master sysUpTime {}), IF-MIB registered",
        clock.ticks
    );

    let mut snap: Option<(Instant, IfMib)> = None;
    while !stop() {
        let pdu = r.next()?;
        // Refreshed when stale, request or not: the same poll finds the
        // link changes to notify.
        if snap
            .as_ref()
            .is_none_or(|(t, _)| t.elapsed() >= SNAPSHOT_TTL)
        {
            let mut rows = IfMib::rows(q.as_ref());
            let now = Instant::now();
            for (link, row) in links.update(&rows, now) {
                pid += 1;
                w.write_all(&wire::notify(session_id, pid, &notification(link, &row)))?;
                tracing::info!(
                    "snmp: {} notification for {} (ifIndex {})",
                    match link {
                        Link::Up => "linkUp",
                        Link::Down => "linkDown",
                    },
                    row.name,
                    row.index
                );
            }
            links.stamp(&mut rows, &clock);
            snap = Some((now, IfMib::from_rows(&rows)));
        }
        let Some(pdu) = pdu else { continue };
        // The master's answer to a Notify: only an error is worth a word.
        if let Some(m) = master_response(&pdu) {
            if m.status != 0 {
                tracing::warn!(
                    "snmp: master refused notification {} (error {})",
                    m.header.packet_id,
                    m.status
                );
            }
            continue;
        }
        let mib = &snap.as_ref().expect("set above").1;
        match answer(&pdu, mib) {
            Answer::Reply(b) => w.write_all(&b)?,
            Answer::Nothing => {}
            Answer::Close => return Ok(()),
        }
    }
    let mut c = Close::new(CloseReason::Shutdown);
    c.header.session_id = session_id;
    pid += 1;
    c.header.packet_id = pid;
    let _ = w.write_all(&c.to_bytes().map_err(bad)?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ifmib::Row;
    use agentx::encodings::{SearchRange, SearchRangeList, Value as Crate};
    use agentx::pdu::Response;

    fn mib() -> IfMib {
        IfMib::from_rows(&[
            Row {
                index: 1,
                name: "sw1".into(),
                in_octets: 4200,
                ..Row::default()
            },
            Row {
                index: 2,
                name: "sw2".into(),
                ..Row::default()
            },
        ])
    }

    fn sr(start: &[u32], end: &[u32]) -> SearchRange {
        SearchRange::new(id(start).unwrap(), id(end).unwrap())
    }

    /// Decoded by the crate (what any AgentX peer would read), as our
    /// values, for the types these tests serve.
    fn decode(b: &[u8]) -> Vec<(Vec<u32>, Snmp)> {
        let r = Response::from_bytes(b).unwrap();
        r.vb.unwrap()
            .0
            .into_iter()
            .map(|v| {
                let d = match v.data {
                    Crate::Integer(i) => Snmp::Integer(i),
                    Crate::OctetString(o) => Snmp::text(&o.0),
                    Crate::Counter32(n) => Snmp::Counter32(n),
                    Crate::Gauge32(n) => Snmp::Gauge32(n),
                    Crate::Counter64(n) => Snmp::Counter64(n),
                    Crate::NoSuchObject => Snmp::NoSuchObject,
                    Crate::NoSuchInstance => Snmp::NoSuchInstance,
                    Crate::EndOfMibView => Snmp::EndOfMibView,
                    other => panic!("unexpected {other:?}"),
                };
                (sub_ids(&v.name), d)
            })
            .collect()
    }

    #[test]
    fn get_next_walks_and_ends() {
        let m = mib();
        let mut g = GetNext::new(SearchRangeList(vec![
            sr(&[1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6], &[]),
            sr(&[1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 18, 2], &[]),
        ]));
        g.header.packet_id = 9;
        let Answer::Reply(b) = answer(&g.to_bytes().unwrap(), &m) else {
            panic!()
        };
        let v = decode(&b);
        assert_eq!(v[0].0, vec![1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 6, 1]);
        assert_eq!(v[0].1, Snmp::Counter64(4200));
        assert_eq!(v[1].1, Snmp::EndOfMibView);
        assert_eq!(Header::from_bytes(&b).unwrap().packet_id, 9);
    }

    #[test]
    fn get_answers_no_such_instance_inside_and_object_outside() {
        let m = mib();
        let mut g = Get::new(SearchRangeList(vec![
            sr(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 2, 2], &[]),
            sr(&[1, 3, 6, 1, 2, 1, 2, 2, 1, 2, 9], &[]),
            sr(&[1, 3, 6, 1, 4, 1], &[]),
        ]));
        let Answer::Reply(b) = answer(&g.to_bytes().unwrap(), &m) else {
            panic!()
        };
        let v = decode(&b);
        assert_eq!(v[0].1, Snmp::text("sw2"));
        assert_eq!(v[1].1, Snmp::NoSuchInstance);
        assert_eq!(v[2].1, Snmp::NoSuchObject);
    }

    #[test]
    fn get_bulk_interleaves_repeaters_and_stops_at_the_end() {
        let m = mib();
        let mut g = GetBulk::new(SearchRangeList(vec![
            sr(&[1, 3, 6, 1, 2, 1, 2, 1], &[]),
            sr(
                &[1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1],
                &[1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 2],
            ),
        ]));
        g.non_repeaters = 1;
        g.max_repetitions = 5;
        let Answer::Reply(b) = answer(&g.to_bytes().unwrap(), &m) else {
            panic!()
        };
        let v = decode(&b);
        assert_eq!(v[0], (vec![1, 3, 6, 1, 2, 1, 2, 1, 0], Snmp::Integer(2)));
        // ifName.1, ifName.2, then the end of the range.
        assert_eq!(v.len(), 4);
        assert_eq!(v[2].0, vec![1, 3, 6, 1, 2, 1, 31, 1, 1, 1, 1, 2]);
        assert_eq!(v[3].1, Snmp::EndOfMibView);
    }

    /// sysUpTime and status in either byte order; not a Response or
    /// too short: nothing.
    #[test]
    fn master_responses_in_both_byte_orders() {
        let mut le = vec![1, 18, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 8, 0, 0, 0];
        le.extend_from_slice(&4_000_000_000u32.to_le_bytes());
        le.extend_from_slice(&[17, 0, 0, 0]);
        let r = master_response(&le).unwrap();
        assert_eq!((r.header.session_id, r.header.packet_id), (5, 9));
        assert_eq!((r.uptime, r.status), (4_000_000_000, 17));
        let mut be = vec![
            1,
            18,
            1 << 4,
            0,
            0,
            0,
            0,
            5,
            0,
            0,
            0,
            0,
            0,
            0,
            0,
            9,
            0,
            0,
            0,
            8,
        ];
        be.extend_from_slice(&300u32.to_be_bytes());
        be.extend_from_slice(&[0, 0, 0, 0]);
        let r = master_response(&be).unwrap();
        assert_eq!((r.uptime, r.status), (300, 0));
        assert!(master_response(&le[..HEADER + 4]).is_none());
        let mut get = le.clone();
        get[1] = 5;
        assert!(master_response(&get).is_none());
    }

    #[test]
    fn sets_are_refused_and_garbage_closes() {
        let m = mib();
        let mut h = Header::new(Type::TestSet).to_bytes();
        h[16..20].copy_from_slice(&0u32.to_le_bytes());
        let Answer::Reply(b) = answer(&h, &m) else {
            panic!()
        };
        assert_eq!(u16::from_le_bytes([b[24], b[25]]), NOT_WRITABLE);
        assert_eq!(answer(&[1, 2, 3], &m), Answer::Close);
        // Truncations and bit flips of a valid PDU never panic.
        let g = GetBulk::new(SearchRangeList(vec![sr(IF_TABLE, &[])]))
            .to_bytes()
            .unwrap();
        for cut in 0..g.len() {
            let _ = answer(&g[..cut], &m);
            let mut f = g.clone();
            f[cut] ^= 0xff;
            let _ = answer(&f, &m);
        }
    }
}
