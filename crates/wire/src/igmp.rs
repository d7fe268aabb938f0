//! IGMP v1/v2/v3 (RFC 1112, RFC 2236, RFC 3376): the codec multicast
//! snooping needs.
//!
//! The input of [`IgmpMessage::parse`] is the **IGMP message**: the IPv4
//! payload after the IPv4 header (options included), cut to the IPv4 total
//! length (Ethernet padding after it would break the checksum, which covers
//! the whole message). Layouts, offsets from the IGMP type octet:
//!
//! | offset | octets | all messages                                    |
//! |-------:|-------:|-------------------------------------------------|
//! |      0 |      1 | type                                            |
//! |      1 |      1 | Max Resp Code (queries), reserved otherwise     |
//! |      2 |      2 | checksum (RFC 1071, over the whole message)     |
//!
//! * Query 0x11: group at 4..8. Length 8 is v1 (Max Resp Code 0) or v2;
//!   length ≥ 12 is v3 (RFC 3376 7.1): octet 8 is Resv(4) | S(1) | QRV(3),
//!   octet 9 QQIC, 10..12 Number of Sources N, then N sources. Lengths 9
//!   to 11 are [`Error::Malformed`] (RFC 3376 7.1: silently ignored).
//!   Octets after the sources are covered by the checksum, otherwise
//!   ignored (RFC 3376 4.1.10).
//! * v1 Report 0x12, v2 Report 0x16, Leave Group 0x17: group at 4..8.
//! * v3 Report 0x22: 4..6 reserved, 6..8 Number of Group Records M, then M
//!   records: Record Type (1), Aux Data Len in 32-bit words (1), Number of
//!   Sources N (2), multicast address (4), N sources (4 each), aux data
//!   (skipped; written as none).
//!
//! Reserved fields are ignored on receipt and written as zero; octets after
//! the fixed part of v1/v2 messages are ignored. Unknown message types give
//! [`Error::Unsupported`]; unknown record types are kept as
//! [`RecordType::Unknown`] (RFC 3376 says to ignore them: that is the
//! caller's business).
//!
//! Unlike the data-path views of this crate, [`IgmpMessage`] is an owned
//! value that allocates (source lists, records): IGMP goes to the control
//! plane, like LACP. Every allocation is capped by the octets actually
//! present, never by a count field alone.
//!
//! **No-panic contract:** [`IgmpMessage::parse`] returns an [`Error`] on any
//! input (a bad checksum is [`Error::Checksum`]); [`IgmpMessage::emit`]
//! returns [`Error::Truncated`] on a short buffer and [`Error::Malformed`]
//! for values the format cannot carry.

use core::time::Duration;
use std::net::Ipv4Addr;

use crate::checksum;
use crate::{Error, Result};

/// Membership Query.
pub const TYPE_QUERY: u8 = 0x11;
/// IGMPv1 Membership Report.
pub const TYPE_REPORT_V1: u8 = 0x12;
/// IGMPv2 Membership Report.
pub const TYPE_REPORT_V2: u8 = 0x16;
/// IGMPv2 Leave Group.
pub const TYPE_LEAVE: u8 = 0x17;
/// IGMPv3 Membership Report.
pub const TYPE_REPORT_V3: u8 = 0x22;

/// Length of v1/v2 messages and of the fixed part of every message.
pub const HEADER_LEN: usize = 8;
/// Length of an IGMPv3 query without sources.
pub const QUERY_V3_LEN: usize = 12;
/// Length of an IGMPv3 group record without sources or aux data.
pub const RECORD_HEADER_LEN: usize = 8;

/// All-systems group 224.0.0.1, destination of general queries.
pub const ALL_SYSTEMS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 1);
/// All-routers group 224.0.0.2, destination of v2 Leave Group messages.
pub const ALL_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 2);
/// All IGMPv3-capable routers 224.0.0.22, destination of v3 reports.
pub const V3_ROUTERS: Ipv4Addr = Ipv4Addr::new(224, 0, 0, 22);

/// The floating-point codes of IGMPv3 and MLDv2: a code below
/// `1 << (mant_bits + 3)` is the value itself, otherwise it is
/// `1 | exp(3) | mant(mant_bits)` meaning `(mant | 1 << mant_bits) << (exp + 3)`.
pub(crate) const fn decode_float(code: u32, mant_bits: u32) -> u32 {
    if code < 1 << (mant_bits + 3) {
        code
    } else {
        let exp = (code >> mant_bits) & 0x7;
        let mant = code & ((1 << mant_bits) - 1);
        (mant | 1 << mant_bits) << (exp + 3)
    }
}

/// The inverse of [`decode_float`]: rounds down to the nearest value the
/// code can carry, saturating at the largest.
pub(crate) const fn encode_float(value: u32, mant_bits: u32) -> u32 {
    let one = 1 << mant_bits;
    if value < one << 3 {
        return value;
    }
    let mut exp = 7u32;
    loop {
        let m = value >> (exp + 3);
        if m >= one {
            let m = if m > 2 * one - 1 { 2 * one - 1 } else { m };
            return 1 << (mant_bits + 3) | (exp << mant_bits) | (m & (one - 1));
        }
        // value >= 8·one gives m >= one at exp 0: no underflow.
        exp -= 1;
    }
}

/// Decodes an 8-bit IGMPv3 Max Resp Code or QQIC (RFC 3376 4.1.1, 4.1.7):
/// below 128 the value itself, otherwise `1 | exp(3) | mant(4)` meaning
/// `(mant | 0x10) << (exp + 3)`. Max Resp Code is in tenths of a second,
/// QQIC in seconds. MLDv2's QQIC uses the same encoding (RFC 3810 5.1.9).
pub const fn decode_code(code: u8) -> u32 {
    decode_float(code as u32, 4)
}

/// Encodes `value` as an 8-bit code, rounding down to the nearest value
/// the encoding can carry (saturating at 31744, code 0xff). The inverse of
/// [`decode_code`] on every value it can produce.
pub const fn encode_code(value: u32) -> u8 {
    encode_float(value, 4) as u8
}

/// IGMP version a query belongs to (RFC 3376 7.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueryVersion {
    /// 8 octets, Max Resp Code 0.
    V1,
    /// 8 octets, Max Resp Code non-zero.
    V2,
    /// 12 octets or more.
    V3,
}

/// The IGMPv3-only part of a query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct QueryV3 {
    /// S flag: suppress router-side processing.
    pub suppress_router_processing: bool,
    /// Querier's Robustness Variable, 0..=7 (0: use the default).
    pub qrv: u8,
    /// Querier's Query Interval Code (decode with [`decode_code`], seconds).
    pub qqic: u8,
    /// Sources of a group-and-source-specific query.
    pub sources: Vec<Ipv4Addr>,
}

/// A Membership Query of any version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Query {
    /// Raw Max Resp Code (v2: tenths of a second; v3: see [`decode_code`];
    /// v1: 0).
    pub max_resp_code: u8,
    /// Group address; 0.0.0.0 for a general query.
    pub group: Ipv4Addr,
    /// Present for IGMPv3 queries.
    pub v3: Option<QueryV3>,
}

impl Query {
    /// Version per RFC 3376 7.1.
    pub fn version(&self) -> QueryVersion {
        match (&self.v3, self.max_resp_code) {
            (Some(_), _) => QueryVersion::V3,
            (None, 0) => QueryVersion::V1,
            (None, _) => QueryVersion::V2,
        }
    }

    /// Maximum response time: 10 s for v1 (RFC 2236 4), the code in
    /// tenths of a second for v2, decoded per RFC 3376 4.1.1 for v3.
    pub fn max_resp_time(&self) -> Duration {
        let tenths = match self.version() {
            QueryVersion::V1 => 100,
            QueryVersion::V2 => u32::from(self.max_resp_code),
            QueryVersion::V3 => decode_code(self.max_resp_code),
        };
        Duration::from_millis(u64::from(tenths) * 100)
    }

    /// Querier's query interval (v3 only), decoded from QQIC.
    pub fn query_interval(&self) -> Option<Duration> {
        self.v3
            .as_ref()
            .map(|v| Duration::from_secs(u64::from(decode_code(v.qqic))))
    }

    /// True for a general query (group 0.0.0.0).
    pub fn is_general(&self) -> bool {
        self.group.is_unspecified()
    }
}

/// Group record type (RFC 3376 4.2.12; the same values in MLDv2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// 1: current state, include mode.
    ModeIsInclude,
    /// 2: current state, exclude mode.
    ModeIsExclude,
    /// 3: filter mode change to include.
    ChangeToInclude,
    /// 4: filter mode change to exclude.
    ChangeToExclude,
    /// 5: source list change, allow.
    AllowNewSources,
    /// 6: source list change, block.
    BlockOldSources,
    /// Any other value (to be ignored, RFC 3376 4.2.12).
    Unknown(u8),
}

impl From<u8> for RecordType {
    fn from(v: u8) -> Self {
        match v {
            1 => RecordType::ModeIsInclude,
            2 => RecordType::ModeIsExclude,
            3 => RecordType::ChangeToInclude,
            4 => RecordType::ChangeToExclude,
            5 => RecordType::AllowNewSources,
            6 => RecordType::BlockOldSources,
            o => RecordType::Unknown(o),
        }
    }
}

impl From<RecordType> for u8 {
    fn from(t: RecordType) -> u8 {
        match t {
            RecordType::ModeIsInclude => 1,
            RecordType::ModeIsExclude => 2,
            RecordType::ChangeToInclude => 3,
            RecordType::ChangeToExclude => 4,
            RecordType::AllowNewSources => 5,
            RecordType::BlockOldSources => 6,
            RecordType::Unknown(v) => v,
        }
    }
}

/// One group record of an IGMPv3 report or address record of an MLDv2
/// report (aux data dropped): the same layout in both, with 4- or
/// 16-octet addresses (RFC 3376 4.2.4, RFC 3810 5.2.4).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Record<A> {
    /// Record type.
    pub record_type: RecordType,
    /// Multicast address.
    pub group: A,
    /// Source addresses.
    pub sources: Vec<A>,
}

/// An IGMPv3 group record.
pub type GroupRecord = Record<Ipv4Addr>;

/// An address of either family as IGMP and MLD carry it.
pub trait WireAddr: Copy {
    /// Octets on the wire.
    const LEN: usize;
    /// From exactly `LEN` octets.
    fn read(b: &[u8]) -> Self;
    /// Into exactly `LEN` octets.
    fn write(&self, d: &mut [u8]);
}

impl WireAddr for Ipv4Addr {
    const LEN: usize = 4;
    fn read(b: &[u8]) -> Self {
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }
    fn write(&self, d: &mut [u8]) {
        d.copy_from_slice(&self.octets());
    }
}

impl WireAddr for std::net::Ipv6Addr {
    const LEN: usize = 16;
    fn read(b: &[u8]) -> Self {
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        a.into()
    }
    fn write(&self, d: &mut [u8]) {
        d.copy_from_slice(&self.octets());
    }
}

impl<A: WireAddr> Record<A> {
    /// Type, aux length, source count, address: [`RECORD_HEADER_LEN`]
    /// for IGMP, `mld::RECORD_HEADER_LEN` for MLD.
    pub(crate) const HEADER_LEN: usize = 4 + A::LEN;

    pub(crate) fn wire_len(&self) -> usize {
        Self::HEADER_LEN + A::LEN * self.sources.len()
    }
}

/// Reads `n` addresses at `at`, checking they are all present before
/// allocating.
pub(crate) fn read_addrs<A: WireAddr>(b: &[u8], at: usize, n: usize) -> Result<Vec<A>> {
    let end = n
        .checked_mul(A::LEN)
        .and_then(|l| at.checked_add(l))
        .ok_or(Error::Truncated)?;
    let s = b.get(at..end).ok_or(Error::Truncated)?;
    Ok(s.chunks_exact(A::LEN).map(A::read).collect())
}

/// Writes `addrs` back to back at the start of `d`.
pub(crate) fn write_addrs<A: WireAddr>(d: &mut [u8], addrs: &[A]) {
    for (d, a) in d.chunks_exact_mut(A::LEN).zip(addrs) {
        a.write(d);
    }
}

/// Parses `m` records starting at `at` of `msg`.
pub(crate) fn parse_records<A: WireAddr>(
    msg: &[u8],
    mut at: usize,
    m: usize,
) -> Result<Vec<Record<A>>> {
    let hl = Record::<A>::HEADER_LEN;
    // Each record takes at least its header: cap by what is there.
    let cap = m.min(msg.len().saturating_sub(at) / hl);
    let mut records = Vec::with_capacity(cap);
    for _ in 0..m {
        let hdr = msg.get(at..at + hl).ok_or(Error::Truncated)?;
        let aux = usize::from(hdr[1]) * 4;
        let n = usize::from(u16::from_be_bytes([hdr[2], hdr[3]]));
        let sources = read_addrs(msg, at + hl, n)?;
        at += hl + A::LEN * n;
        if msg.len() - at < aux {
            return Err(Error::Truncated);
        }
        at += aux;
        records.push(Record {
            record_type: RecordType::from(hdr[0]),
            group: A::read(&hdr[4..]),
            sources,
        });
    }
    Ok(records)
}

/// Writes `records` from the start of `b` (zeroed, long enough: the sum of
/// their `wire_len`). `count` turns a source count into its field.
pub(crate) fn emit_records<A: WireAddr>(
    b: &mut [u8],
    records: &[Record<A>],
    count: impl Fn(usize) -> Result<u16>,
) -> Result<()> {
    let hl = Record::<A>::HEADER_LEN;
    let mut at = 0;
    for r in records {
        let d = &mut b[at..at + r.wire_len()];
        d[0] = r.record_type.into();
        d[2..4].copy_from_slice(&count(r.sources.len())?.to_be_bytes());
        r.group.write(&mut d[4..hl]);
        write_addrs(&mut d[hl..], &r.sources);
        at += r.wire_len();
    }
    Ok(())
}

/// A parsed IGMP message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IgmpMessage {
    /// 0x11, any version.
    Query(Query),
    /// 0x12.
    ReportV1 {
        /// Group joined.
        group: Ipv4Addr,
    },
    /// 0x16.
    ReportV2 {
        /// Group joined.
        group: Ipv4Addr,
    },
    /// 0x17.
    Leave {
        /// Group left.
        group: Ipv4Addr,
    },
    /// 0x22.
    ReportV3(Vec<GroupRecord>),
}

fn ip4(b: &[u8], at: usize) -> Result<Ipv4Addr> {
    let s = b.get(at..at + 4).ok_or(Error::Truncated)?;
    Ok(Ipv4Addr::new(s[0], s[1], s[2], s[3]))
}

fn be16(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).ok_or(Error::Truncated)?;
    Ok(u16::from_be_bytes([s[0], s[1]]))
}

impl IgmpMessage {
    /// Parses an IGMP message (see the module doc for the input and what
    /// is accepted), verifying its checksum.
    pub fn parse(msg: &[u8]) -> Result<IgmpMessage> {
        if msg.len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if !checksum::verifies(checksum::sum(msg)) {
            return Err(Error::Checksum);
        }
        let group = ip4(msg, 4)?;
        match msg[0] {
            TYPE_QUERY => {
                let max_resp_code = msg[1];
                let v3 = match msg.len() {
                    HEADER_LEN => None,
                    n if n < QUERY_V3_LEN => {
                        return Err(Error::Malformed("IGMP query length 9 to 11"))
                    }
                    _ => {
                        let n = usize::from(be16(msg, 10)?);
                        Some(QueryV3 {
                            suppress_router_processing: msg[8] & 0x08 != 0,
                            qrv: msg[8] & 0x07,
                            qqic: msg[9],
                            sources: read_addrs(msg, QUERY_V3_LEN, n)?,
                        })
                    }
                };
                Ok(IgmpMessage::Query(Query {
                    max_resp_code,
                    group,
                    v3,
                }))
            }
            TYPE_REPORT_V1 => Ok(IgmpMessage::ReportV1 { group }),
            TYPE_REPORT_V2 => Ok(IgmpMessage::ReportV2 { group }),
            TYPE_LEAVE => Ok(IgmpMessage::Leave { group }),
            TYPE_REPORT_V3 => {
                let m = usize::from(be16(msg, 6)?);
                let records = parse_records(msg, HEADER_LEN, m)?;
                Ok(IgmpMessage::ReportV3(records))
            }
            _ => Err(Error::Unsupported("IGMP message type")),
        }
    }

    /// Octets [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            IgmpMessage::Query(Query { v3: None, .. }) => HEADER_LEN,
            IgmpMessage::Query(Query { v3: Some(v), .. }) => QUERY_V3_LEN + 4 * v.sources.len(),
            IgmpMessage::ReportV1 { .. }
            | IgmpMessage::ReportV2 { .. }
            | IgmpMessage::Leave { .. } => HEADER_LEN,
            IgmpMessage::ReportV3(r) => {
                HEADER_LEN + r.iter().map(GroupRecord::wire_len).sum::<usize>()
            }
        }
    }

    /// Writes the message with its checksum at the start of `buf` and
    /// returns the octets written ([`buffer_len`](Self::buffer_len)).
    /// Errors: [`Error::Truncated`] if `buf` is shorter; [`Error::Malformed`]
    /// for a QRV above 7 or more than 65535 sources or records.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        b.fill(0);
        let count = |n: usize| u16::try_from(n).map_err(|_| Error::Malformed("IGMP count"));
        let (ty, group) = match self {
            IgmpMessage::Query(q) => {
                b[1] = q.max_resp_code;
                if let Some(v) = &q.v3 {
                    if v.qrv > 7 {
                        return Err(Error::Malformed("IGMP QRV above 7"));
                    }
                    b[8] = (u8::from(v.suppress_router_processing) << 3) | v.qrv;
                    b[9] = v.qqic;
                    b[10..12].copy_from_slice(&count(v.sources.len())?.to_be_bytes());
                    write_addrs(&mut b[QUERY_V3_LEN..], &v.sources);
                }
                (TYPE_QUERY, q.group)
            }
            IgmpMessage::ReportV1 { group } => (TYPE_REPORT_V1, *group),
            IgmpMessage::ReportV2 { group } => (TYPE_REPORT_V2, *group),
            IgmpMessage::Leave { group } => (TYPE_LEAVE, *group),
            IgmpMessage::ReportV3(records) => {
                b[6..8].copy_from_slice(&count(records.len())?.to_be_bytes());
                emit_records(&mut b[HEADER_LEN..], records, count)?;
                (TYPE_REPORT_V3, Ipv4Addr::UNSPECIFIED)
            }
        };
        b[0] = ty;
        if ty != TYPE_REPORT_V3 {
            b[4..8].copy_from_slice(&group.octets());
        }
        let c = checksum::finish(checksum::sum(b));
        b[2..4].copy_from_slice(&c.to_be_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn record_header_lengths() {
        assert_eq!(GroupRecord::HEADER_LEN, RECORD_HEADER_LEN);
        assert_eq!(
            crate::mld::AddressRecord::HEADER_LEN,
            crate::mld::RECORD_HEADER_LEN
        );
    }

    use super::*;

    fn a(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn all_kinds() -> Vec<IgmpMessage> {
        vec![
            IgmpMessage::Query(Query {
                max_resp_code: 0,
                group: Ipv4Addr::UNSPECIFIED,
                v3: None,
            }),
            IgmpMessage::Query(Query {
                max_resp_code: 100,
                group: a("239.1.2.3"),
                v3: None,
            }),
            IgmpMessage::Query(Query {
                max_resp_code: 0x8f,
                group: Ipv4Addr::UNSPECIFIED,
                v3: Some(QueryV3 {
                    suppress_router_processing: false,
                    qrv: 2,
                    qqic: 125,
                    sources: vec![],
                }),
            }),
            IgmpMessage::Query(Query {
                max_resp_code: 10,
                group: a("232.1.1.1"),
                v3: Some(QueryV3 {
                    suppress_router_processing: true,
                    qrv: 7,
                    qqic: 0xff,
                    sources: vec![a("10.0.0.1"), a("10.0.0.2"), a("192.0.2.9")],
                }),
            }),
            IgmpMessage::ReportV1 {
                group: a("224.1.1.1"),
            },
            IgmpMessage::ReportV2 {
                group: a("239.255.255.250"),
            },
            IgmpMessage::Leave {
                group: a("239.255.255.250"),
            },
            IgmpMessage::ReportV3(vec![]),
            IgmpMessage::ReportV3(vec![
                GroupRecord {
                    record_type: RecordType::ModeIsInclude,
                    group: a("232.0.0.1"),
                    sources: vec![a("10.1.1.1")],
                },
                GroupRecord {
                    record_type: RecordType::ModeIsExclude,
                    group: a("239.0.0.2"),
                    sources: vec![],
                },
                GroupRecord {
                    record_type: RecordType::ChangeToInclude,
                    group: a("239.0.0.3"),
                    sources: vec![],
                },
                GroupRecord {
                    record_type: RecordType::ChangeToExclude,
                    group: a("239.0.0.4"),
                    sources: vec![],
                },
                GroupRecord {
                    record_type: RecordType::AllowNewSources,
                    group: a("232.0.0.5"),
                    sources: vec![a("10.1.1.2"), a("10.1.1.3")],
                },
                GroupRecord {
                    record_type: RecordType::BlockOldSources,
                    group: a("232.0.0.6"),
                    sources: vec![a("10.1.1.4")],
                },
                GroupRecord {
                    record_type: RecordType::Unknown(0x42),
                    group: a("232.0.0.7"),
                    sources: vec![],
                },
            ]),
        ]
    }

    fn emit_vec(m: &IgmpMessage) -> Vec<u8> {
        let mut b = vec![0xaa; m.buffer_len() + 3];
        let n = m.emit(&mut b).unwrap();
        assert_eq!(n, m.buffer_len());
        b.truncate(n);
        b
    }

    fn refill(b: &mut [u8]) {
        if b.len() >= 4 {
            b[2] = 0;
            b[3] = 0;
            let c = checksum::finish(checksum::sum(b));
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
    }

    #[test]
    fn round_trip_every_kind() {
        for m in all_kinds() {
            let b = emit_vec(&m);
            assert_eq!(IgmpMessage::parse(&b), Ok(m.clone()), "{m:?}");
            assert!(m.emit(&mut vec![0; m.buffer_len() - 1]) == Err(Error::Truncated));
        }
    }

    #[test]
    fn query_versions() {
        let k = all_kinds();
        let v = |i: usize| match &k[i] {
            IgmpMessage::Query(q) => q.clone(),
            _ => unreachable!(),
        };
        assert_eq!(v(0).version(), QueryVersion::V1);
        assert_eq!(v(0).max_resp_time(), Duration::from_secs(10));
        assert_eq!(v(1).version(), QueryVersion::V2);
        assert_eq!(v(1).max_resp_time(), Duration::from_secs(10));
        assert_eq!(v(2).version(), QueryVersion::V3);
        // 0x8f: exp 0, mant 15 -> 31 << 3 = 248 tenths.
        assert_eq!(v(2).max_resp_time(), Duration::from_millis(24_800));
        assert_eq!(v(2).query_interval(), Some(Duration::from_secs(125)));
        assert_eq!(v(1).query_interval(), None);
        assert!(v(2).is_general() && !v(3).is_general());
    }

    #[test]
    fn code_table() {
        assert_eq!(decode_code(0), 0);
        assert_eq!(decode_code(0x7f), 127);
        assert_eq!(decode_code(0x80), 128); // 16 << 3
        assert_eq!(decode_code(0x81), 136); // 17 << 3
        assert_eq!(decode_code(0x8f), 248); // 31 << 3
        assert_eq!(decode_code(0x90), 256); // 16 << 4
        assert_eq!(decode_code(0xa5), 21 << 5);
        assert_eq!(decode_code(0xf0), 16 << 10);
        assert_eq!(decode_code(0xff), 31744); // 31 << 10
        for c in 0..=255u8 {
            assert_eq!(encode_code(decode_code(c)), c, "code {c:#x}");
        }
        // Rounds down, saturates.
        assert_eq!(encode_code(129), 0x80);
        assert_eq!(encode_code(135), 0x80);
        assert_eq!(encode_code(255), 0x8f);
        assert_eq!(encode_code(u32::MAX), 0xff);
        for v in (0..40_000u32).step_by(7) {
            assert!(decode_code(encode_code(v)) <= v);
        }
    }

    /// An IGMPv3 report laid out by hand from RFC 3376 4.2, as a host
    /// 10.0.0.1 would send it to 224.0.0.22.
    const V3_REPORT: [u8; 36] = [
        0x22, 0x00, // type v3 report, reserved
        0x4e, 0x4c, // checksum
        0x00, 0x00, // reserved
        0x00, 0x02, // 2 group records
        // record 1: CHANGE_TO_EXCLUDE {} for 239.1.1.1 (a join)
        0x04, 0x00, 0x00, 0x00, // type 4, aux len 0, 0 sources
        239, 1, 1, 1, // multicast address
        // record 2: MODE_IS_INCLUDE {10.0.0.5, 10.0.0.6} for 232.1.1.1,
        // with one word of aux data
        0x01, 0x01, 0x00, 0x02, // type 1, aux len 1 word, 2 sources
        232, 1, 1, 1, // multicast address
        10, 0, 0, 5, // source 1
        10, 0, 0, 6, // source 2
        0xde, 0xad, 0xbe, 0xef, // aux data (skipped)
    ];

    #[test]
    fn hand_written_v3_report() {
        assert!(checksum::verifies(checksum::sum(&V3_REPORT)));
        let m = IgmpMessage::parse(&V3_REPORT).unwrap();
        let want = IgmpMessage::ReportV3(vec![
            GroupRecord {
                record_type: RecordType::ChangeToExclude,
                group: a("239.1.1.1"),
                sources: vec![],
            },
            GroupRecord {
                record_type: RecordType::ModeIsInclude,
                group: a("232.1.1.1"),
                sources: vec![a("10.0.0.5"), a("10.0.0.6")],
            },
        ]);
        assert_eq!(m, want);
        // Re-emitted without the aux data.
        let b = emit_vec(&m);
        assert_eq!(b.len(), 32);
        assert_eq!(&b[4..17], &V3_REPORT[4..17]);
        assert_eq!(b[17], 0); // aux data length
        assert_eq!(&b[18..32], &V3_REPORT[18..32]);
    }

    /// A v2 general query as a Linux querier sends it: 11 64 ee 9b 00000000.
    #[test]
    fn hand_written_v2_query() {
        let b = [0x11, 0x64, 0xee, 0x9b, 0, 0, 0, 0];
        let m = IgmpMessage::parse(&b).unwrap();
        assert_eq!(
            m,
            IgmpMessage::Query(Query {
                max_resp_code: 100,
                group: Ipv4Addr::UNSPECIFIED,
                v3: None
            })
        );
        assert_eq!(emit_vec(&m), b);
    }

    #[test]
    fn truncations_are_errors() {
        for m in all_kinds() {
            let full = emit_vec(&m);
            for n in 0..full.len() {
                let mut b = full[..n].to_vec();
                assert!(IgmpMessage::parse(&b).is_err() || n == full.len());
                // Fix the checksum so the structural checks are reached.
                refill(&mut b);
                match IgmpMessage::parse(&b) {
                    Err(_) => {}
                    // A v3 query cut to 8 octets is a valid v1/v2 query.
                    Ok(IgmpMessage::Query(Query { v3: None, .. })) if n == HEADER_LEN => {}
                    Ok(other) => panic!("{n} octets of {m:?} parsed as {other:?}"),
                }
            }
        }
        for n in 0..V3_REPORT.len() {
            let mut b = V3_REPORT[..n].to_vec();
            refill(&mut b);
            assert!(IgmpMessage::parse(&b).is_err(), "{n}");
        }
    }

    #[test]
    fn bad_checksum_rejected() {
        for m in all_kinds() {
            let mut b = emit_vec(&m);
            b[2] ^= 0x01;
            assert_eq!(IgmpMessage::parse(&b), Err(Error::Checksum));
        }
        let mut b = V3_REPORT;
        b[12] ^= 0x10;
        assert_eq!(IgmpMessage::parse(&b), Err(Error::Checksum));
    }

    #[test]
    fn odd_lengths_and_types() {
        // Query of 10 octets: ignored (RFC 3376 7.1).
        let mut b = vec![0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        refill(&mut b);
        assert!(matches!(IgmpMessage::parse(&b), Err(Error::Malformed(_))));
        // Unknown type.
        let mut b = vec![0x13, 0, 0, 0, 0, 0, 0, 0];
        refill(&mut b);
        assert!(matches!(IgmpMessage::parse(&b), Err(Error::Unsupported(_))));
        // Trailing octets after a v2 report or v3 query sources: ignored.
        let mut b = vec![0x16, 0, 0, 0, 239, 0, 0, 1, 9, 9, 9];
        refill(&mut b);
        assert_eq!(
            IgmpMessage::parse(&b),
            Ok(IgmpMessage::ReportV2 {
                group: a("239.0.0.1")
            })
        );
        // A report claiming 65535 records in 8 octets: truncated, no
        // large allocation.
        let mut b = vec![0x22, 0, 0, 0, 0, 0, 0xff, 0xff];
        refill(&mut b);
        assert_eq!(IgmpMessage::parse(&b), Err(Error::Truncated));
        // QRV above 7 cannot be emitted.
        let q = IgmpMessage::Query(Query {
            max_resp_code: 1,
            group: Ipv4Addr::UNSPECIFIED,
            v3: Some(QueryV3 {
                qrv: 8,
                ..QueryV3::default()
            }),
        });
        assert!(matches!(q.emit(&mut [0; 64]), Err(Error::Malformed(_))));
    }
}
