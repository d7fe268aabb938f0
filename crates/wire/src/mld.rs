//! MLD v1/v2 (RFC 2710, RFC 3810): the codec multicast snooping needs.
//!
//! MLD messages are ICMPv6 messages. The input of [`MldMessage::parse`] is
//! the **ICMPv6 message** (the bytes at the upper-layer offset of the IPv6
//! packet, to the end of its payload); the checksum covers the IPv6
//! pseudo-header (RFC 8200 8.1), so the IPv6 source and destination are
//! parameters. Layouts, offsets from the ICMPv6 type octet:
//!
//! | offset | octets | field                                             |
//! |-------:|-------:|---------------------------------------------------|
//! |      0 |      1 | type: 130 query, 131 v1 report, 132 done, 143 v2 report |
//! |      1 |      1 | code (ignored, written 0)                         |
//! |      2 |      2 | ICMPv6 checksum                                   |
//!
//! * Query 130 / v1 Report 131 / Done 132: 4..6 Maximum Response Code
//!   (v1: delay in milliseconds; meaningful in queries only), 6..8
//!   reserved, 8..24 multicast address. A query of 24 octets is MLDv1,
//!   of 28 or more MLDv2 (RFC 3810 8.1): octet 24 is Resv(4) | S(1) |
//!   QRV(3), 25 QQIC, 26..28 Number of Sources N, then N sources.
//!   Queries of 25 to 27 octets are [`Error::Malformed`] (RFC 3810 8.1:
//!   silently ignored). Octets after the sources are ignored.
//! * v2 Report 143: 4..6 reserved, 6..8 Number of Multicast Address
//!   Records M, then M records: Record Type (1), Aux Data Len in 32-bit
//!   words (1), Number of Sources N (2), multicast address (16), N
//!   sources (16 each), aux data (skipped; written as none).
//!
//! Record types are those of IGMPv3 ([`RecordType`], RFC 3810 5.2.12).
//! Other ICMPv6 types give [`Error::Unsupported`]. Like
//! [`crate::igmp`], [`MldMessage`] is an owned, allocating value for the
//! control plane, every allocation capped by the octets present.
//!
//! **No-panic contract:** [`MldMessage::parse`] returns an [`Error`] on any
//! input (a bad checksum is [`Error::Checksum`]); [`MldMessage::emit`]
//! returns [`Error::Truncated`] on a short buffer and [`Error::Malformed`]
//! for values the format cannot carry.

use core::time::Duration;
use std::net::Ipv6Addr;

use crate::checksum;
use crate::igmp::{emit_records, parse_records, read_addrs, write_addrs};
pub use crate::igmp::{Record, RecordType};
use crate::ip::{IpPair, IpProtocol};
use crate::{Error, Result};

/// Multicast Listener Query (v1 and v2).
pub const TYPE_QUERY: u8 = 130;
/// MLDv1 Multicast Listener Report.
pub const TYPE_REPORT_V1: u8 = 131;
/// MLDv1 Multicast Listener Done.
pub const TYPE_DONE: u8 = 132;
/// MLDv2 Multicast Listener Report.
pub const TYPE_REPORT_V2: u8 = 143;

/// Length of MLDv1 messages.
pub const V1_LEN: usize = 24;
/// Length of an MLDv2 query without sources.
pub const QUERY_V2_LEN: usize = 28;
/// Length of the fixed part of an MLDv2 report.
pub const REPORT_V2_HEADER_LEN: usize = 8;
/// Length of an MLDv2 address record without sources or aux data.
pub const RECORD_HEADER_LEN: usize = 20;

/// Link-scope all-nodes ff02::1, destination of general queries.
pub const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
/// Link-scope all-routers ff02::2, destination of MLDv1 Done.
pub const ALL_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 2);
/// All MLDv2-capable routers ff02::16, destination of MLDv2 reports.
pub const V2_ROUTERS: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 0x16);

/// Decodes a 16-bit MLDv2 Maximum Response Code to milliseconds
/// (RFC 3810 5.1.3): below 32768 the value itself, otherwise
/// `1 | exp(3) | mant(12)` meaning `(mant | 0x1000) << (exp + 3)`.
pub const fn decode_max_resp_code(code: u16) -> u32 {
    crate::igmp::decode_float(code as u32, 12)
}

/// Encodes milliseconds as a Maximum Response Code, rounding down to a
/// value the encoding can carry (saturating at 8387584 ms, code 0xffff).
/// The inverse of [`decode_max_resp_code`] on every value it produces.
pub const fn encode_max_resp_code(ms: u32) -> u16 {
    crate::igmp::encode_float(ms, 12) as u16
}

/// The MLDv2-only part of a query.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct QueryV2 {
    /// S flag: suppress router-side processing.
    pub suppress_router_processing: bool,
    /// Querier's Robustness Variable, 0..=7.
    pub qrv: u8,
    /// Querier's Query Interval Code (seconds, decode with
    /// [`crate::igmp::decode_code`]).
    pub qqic: u8,
    /// Sources of a multicast-address-and-source-specific query.
    pub sources: Vec<Ipv6Addr>,
}

/// A Multicast Listener Query of either version.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Query {
    /// Raw Maximum Response Code (v1: milliseconds; v2: see
    /// [`decode_max_resp_code`]).
    pub max_resp_code: u16,
    /// Multicast address; `::` for a general query.
    pub group: Ipv6Addr,
    /// Present for MLDv2 queries.
    pub v2: Option<QueryV2>,
}

impl Query {
    /// 1 or 2.
    pub fn version(&self) -> u8 {
        if self.v2.is_some() {
            2
        } else {
            1
        }
    }

    /// Maximum response delay: linear milliseconds for v1, decoded per
    /// RFC 3810 5.1.3 for v2.
    pub fn max_resp_time(&self) -> Duration {
        let ms = match self.v2 {
            None => u32::from(self.max_resp_code),
            Some(_) => decode_max_resp_code(self.max_resp_code),
        };
        Duration::from_millis(u64::from(ms))
    }

    /// Querier's query interval (v2 only), decoded from QQIC.
    pub fn query_interval(&self) -> Option<Duration> {
        self.v2
            .as_ref()
            .map(|v| Duration::from_secs(u64::from(crate::igmp::decode_code(v.qqic))))
    }

    /// True for a general query (address `::`).
    pub fn is_general(&self) -> bool {
        self.group.is_unspecified()
    }
}

/// One multicast address record of an MLDv2 report (aux data dropped).
pub type AddressRecord = Record<Ipv6Addr>;

/// A parsed MLD message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum MldMessage {
    /// 130, either version.
    Query(Query),
    /// 131.
    ReportV1 {
        /// Multicast address listened to.
        group: Ipv6Addr,
    },
    /// 132.
    Done {
        /// Multicast address no longer listened to.
        group: Ipv6Addr,
    },
    /// 143.
    ReportV2(Vec<AddressRecord>),
}

fn ip6(b: &[u8], at: usize) -> Result<Ipv6Addr> {
    let s = b.get(at..at + 16).ok_or(Error::Truncated)?;
    let mut a = [0u8; 16];
    a.copy_from_slice(s);
    Ok(Ipv6Addr::from(a))
}

fn be16(b: &[u8], at: usize) -> Result<u16> {
    let s = b.get(at..at + 2).ok_or(Error::Truncated)?;
    Ok(u16::from_be_bytes([s[0], s[1]]))
}

fn pseudo(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> u32 {
    IpPair::V6 { src, dst }.pseudo_header_sum(IpProtocol::Icmpv6, len as u32)
}

impl MldMessage {
    /// Parses an MLD message carried from `src` to `dst` (see the module
    /// doc for the input and what is accepted), verifying its checksum.
    pub fn parse(msg: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> Result<MldMessage> {
        if msg.len() < REPORT_V2_HEADER_LEN {
            return Err(Error::Truncated);
        }
        if u32::try_from(msg.len()).is_err() {
            return Err(Error::Malformed("MLD message longer than 4 GiB"));
        }
        let acc = checksum::combine(pseudo(src, dst, msg.len()), checksum::sum(msg));
        if !checksum::verifies(acc) {
            return Err(Error::Checksum);
        }
        match msg[0] {
            TYPE_QUERY => {
                let max_resp_code = be16(msg, 4)?;
                let group = ip6(msg, 8)?;
                let v2 = match msg.len() {
                    V1_LEN => None,
                    n if n < QUERY_V2_LEN => {
                        return Err(Error::Malformed("MLD query length 25 to 27"))
                    }
                    _ => {
                        let n = usize::from(be16(msg, 26)?);
                        Some(QueryV2 {
                            suppress_router_processing: msg[24] & 0x08 != 0,
                            qrv: msg[24] & 0x07,
                            qqic: msg[25],
                            sources: read_addrs(msg, QUERY_V2_LEN, n)?,
                        })
                    }
                };
                Ok(MldMessage::Query(Query {
                    max_resp_code,
                    group,
                    v2,
                }))
            }
            TYPE_REPORT_V1 => Ok(MldMessage::ReportV1 {
                group: ip6(msg, 8)?,
            }),
            TYPE_DONE => Ok(MldMessage::Done {
                group: ip6(msg, 8)?,
            }),
            TYPE_REPORT_V2 => {
                let m = usize::from(be16(msg, 6)?);
                let records = parse_records(msg, REPORT_V2_HEADER_LEN, m)?;
                Ok(MldMessage::ReportV2(records))
            }
            _ => Err(Error::Unsupported("ICMPv6 type is not MLD")),
        }
    }

    /// Octets [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            MldMessage::Query(Query { v2: None, .. }) => V1_LEN,
            MldMessage::Query(Query { v2: Some(v), .. }) => QUERY_V2_LEN + 16 * v.sources.len(),
            MldMessage::ReportV1 { .. } | MldMessage::Done { .. } => V1_LEN,
            MldMessage::ReportV2(r) => {
                REPORT_V2_HEADER_LEN + r.iter().map(AddressRecord::wire_len).sum::<usize>()
            }
        }
    }

    /// Writes the message, with its checksum for `src` → `dst`, at the
    /// start of `buf` and returns the octets written
    /// ([`buffer_len`](Self::buffer_len)). Errors: [`Error::Truncated`] if
    /// `buf` is shorter; [`Error::Malformed`] for a QRV above 7 or more
    /// than 65535 sources or records.
    pub fn emit(&self, src: Ipv6Addr, dst: Ipv6Addr, buf: &mut [u8]) -> Result<usize> {
        let len = self.buffer_len();
        if u32::try_from(len).is_err() {
            return Err(Error::Malformed("MLD message longer than 4 GiB"));
        }
        let b = buf.get_mut(..len).ok_or(Error::Truncated)?;
        b.fill(0);
        let count = |n: usize| u16::try_from(n).map_err(|_| Error::Malformed("MLD count"));
        let (ty, group) = match self {
            MldMessage::Query(q) => {
                b[4..6].copy_from_slice(&q.max_resp_code.to_be_bytes());
                if let Some(v) = &q.v2 {
                    if v.qrv > 7 {
                        return Err(Error::Malformed("MLD QRV above 7"));
                    }
                    b[24] = (u8::from(v.suppress_router_processing) << 3) | v.qrv;
                    b[25] = v.qqic;
                    b[26..28].copy_from_slice(&count(v.sources.len())?.to_be_bytes());
                    write_addrs(&mut b[QUERY_V2_LEN..], &v.sources);
                }
                (TYPE_QUERY, Some(q.group))
            }
            MldMessage::ReportV1 { group } => (TYPE_REPORT_V1, Some(*group)),
            MldMessage::Done { group } => (TYPE_DONE, Some(*group)),
            MldMessage::ReportV2(records) => {
                b[6..8].copy_from_slice(&count(records.len())?.to_be_bytes());
                emit_records(&mut b[REPORT_V2_HEADER_LEN..], records, count)?;
                (TYPE_REPORT_V2, None)
            }
        };
        b[0] = ty;
        if let Some(g) = group {
            b[8..24].copy_from_slice(&g.octets());
        }
        let c = checksum::finish(checksum::combine(pseudo(src, dst, len), checksum::sum(b)));
        b[2..4].copy_from_slice(&c.to_be_bytes());
        Ok(len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn src() -> Ipv6Addr {
        a("fe80::1")
    }

    fn all_kinds() -> Vec<MldMessage> {
        vec![
            MldMessage::Query(Query {
                max_resp_code: 10_000,
                group: Ipv6Addr::UNSPECIFIED,
                v2: None,
            }),
            MldMessage::Query(Query {
                max_resp_code: 1000,
                group: a("ff05::1:3"),
                v2: None,
            }),
            MldMessage::Query(Query {
                max_resp_code: 0x8123,
                group: Ipv6Addr::UNSPECIFIED,
                v2: Some(QueryV2 {
                    suppress_router_processing: false,
                    qrv: 2,
                    qqic: 125,
                    sources: vec![],
                }),
            }),
            MldMessage::Query(Query {
                max_resp_code: 1000,
                group: a("ff3e::8000:1"),
                v2: Some(QueryV2 {
                    suppress_router_processing: true,
                    qrv: 7,
                    qqic: 0x80,
                    sources: vec![a("2001:db8::1"), a("2001:db8::2")],
                }),
            }),
            MldMessage::ReportV1 {
                group: a("ff02::1:ff00:1"),
            },
            MldMessage::Done {
                group: a("ff05::1:3"),
            },
            MldMessage::ReportV2(vec![]),
            MldMessage::ReportV2(
                [1u8, 2, 3, 4, 5, 6, 200]
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| AddressRecord {
                        record_type: RecordType::from(t),
                        group: Ipv6Addr::new(0xff3e, 0, 0, 0, 0, 0, 0x8000, i as u16),
                        sources: (0..i)
                            .map(|k| Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, k as u16))
                            .collect(),
                    })
                    .collect(),
            ),
        ]
    }

    fn emit_vec(m: &MldMessage, dst: Ipv6Addr) -> Vec<u8> {
        let mut b = vec![0xaa; m.buffer_len() + 5];
        let n = m.emit(src(), dst, &mut b).unwrap();
        assert_eq!(n, m.buffer_len());
        b.truncate(n);
        b
    }

    fn refill(b: &mut [u8], dst: Ipv6Addr) {
        if b.len() >= 4 {
            b[2] = 0;
            b[3] = 0;
            let c = checksum::finish(checksum::combine(
                pseudo(src(), dst, b.len()),
                checksum::sum(b),
            ));
            b[2..4].copy_from_slice(&c.to_be_bytes());
        }
    }

    #[test]
    fn round_trip_every_kind() {
        for m in all_kinds() {
            let b = emit_vec(&m, ALL_NODES);
            assert_eq!(
                MldMessage::parse(&b, src(), ALL_NODES),
                Ok(m.clone()),
                "{m:?}"
            );
            let mut short = vec![0; m.buffer_len() - 1];
            assert_eq!(m.emit(src(), ALL_NODES, &mut short), Err(Error::Truncated));
        }
    }

    #[test]
    fn query_versions() {
        let k = all_kinds();
        let q = |i: usize| match &k[i] {
            MldMessage::Query(q) => q.clone(),
            _ => unreachable!(),
        };
        assert_eq!(q(0).version(), 1);
        assert_eq!(q(0).max_resp_time(), Duration::from_secs(10));
        assert_eq!(q(2).version(), 2);
        // 0x8123: exp 0, mant 0x123 -> 0x1123 << 3 ms.
        assert_eq!(q(2).max_resp_time(), Duration::from_millis(0x1123 << 3));
        assert_eq!(q(2).query_interval(), Some(Duration::from_secs(125)));
        assert_eq!(q(3).query_interval(), Some(Duration::from_secs(128)));
        assert_eq!(q(0).query_interval(), None);
        assert!(q(0).is_general() && !q(1).is_general());
    }

    #[test]
    fn max_resp_code_table() {
        assert_eq!(decode_max_resp_code(0), 0);
        assert_eq!(decode_max_resp_code(10_000), 10_000);
        assert_eq!(decode_max_resp_code(0x7fff), 32767);
        assert_eq!(decode_max_resp_code(0x8000), 32768); // 0x1000 << 3
        assert_eq!(decode_max_resp_code(0x8001), 32776);
        assert_eq!(decode_max_resp_code(0x8fff), 0x1fff << 3);
        assert_eq!(decode_max_resp_code(0x9000), 0x1000 << 4);
        assert_eq!(decode_max_resp_code(0xf000), 0x1000 << 10);
        assert_eq!(decode_max_resp_code(0xffff), 8_387_584); // 0x1fff << 10
        for c in 0..=0xffffu16 {
            assert_eq!(encode_max_resp_code(decode_max_resp_code(c)), c, "{c:#x}");
        }
        assert_eq!(encode_max_resp_code(32769), 0x8000);
        assert_eq!(encode_max_resp_code(u32::MAX), 0xffff);
        for v in (0..9_000_000u32).step_by(997) {
            assert!(decode_max_resp_code(encode_max_resp_code(v)) <= v);
        }
    }

    /// An MLDv2 report laid out by hand from RFC 3810 5.2, from fe80::1 to
    /// ff02::16 (the IPv6 header, with its hop-by-hop router alert, is not
    /// part of the input).
    const V2_REPORT: [u8; 68] = [
        143, 0x00, // type 143, reserved
        0x20, 0x3c, // checksum (pseudo-header fe80::1 -> ff02::16, len 68)
        0x00, 0x00, // reserved
        0x00, 0x02, // 2 multicast address records
        // record 1: CHANGE_TO_EXCLUDE {} for ff05::1:3 (a join)
        0x04, 0x00, 0x00, 0x00, // type 4, aux len 0, 0 sources
        0xff, 0x05, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0, 0x03, // ff05::1:3
        // record 2: ALLOW_NEW_SOURCES {2001:db8::5} for ff3e::8000:1, one
        // word of aux data
        0x05, 0x01, 0x00, 0x01, // type 5, aux len 1 word, 1 source
        0xff, 0x3e, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x00, 0, 0x01, // ff3e::8000:1
        0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05, // 2001:db8::5
        0xde, 0xad, 0xbe, 0xef, // aux data (skipped)
    ];

    #[test]
    fn hand_written_v2_report() {
        let m = MldMessage::parse(&V2_REPORT, src(), V2_ROUTERS).unwrap();
        let want = MldMessage::ReportV2(vec![
            AddressRecord {
                record_type: RecordType::ChangeToExclude,
                group: a("ff05::1:3"),
                sources: vec![],
            },
            AddressRecord {
                record_type: RecordType::AllowNewSources,
                group: a("ff3e::8000:1"),
                sources: vec![a("2001:db8::5")],
            },
        ]);
        assert_eq!(m, want);
        // The checksum covers the pseudo-header: another destination fails.
        assert_eq!(
            MldMessage::parse(&V2_REPORT, src(), ALL_NODES),
            Err(Error::Checksum)
        );
        // Re-emitted without the aux data.
        let b = emit_vec(&m, V2_ROUTERS);
        assert_eq!(b.len(), 64);
        assert_eq!(&b[4..29], &V2_REPORT[4..29]);
        assert_eq!(b[29], 0); // aux data length
        assert_eq!(&b[30..64], &V2_REPORT[30..64]);
    }

    #[test]
    fn truncations_are_errors() {
        for m in all_kinds() {
            let full = emit_vec(&m, ALL_NODES);
            for n in 0..full.len() {
                let mut b = full[..n].to_vec();
                assert!(MldMessage::parse(&b, src(), ALL_NODES).is_err());
                // Fix the checksum so the structural checks are reached.
                refill(&mut b, ALL_NODES);
                match MldMessage::parse(&b, src(), ALL_NODES) {
                    Err(_) => {}
                    // A v2 query cut to 24 octets is a valid v1 query.
                    Ok(MldMessage::Query(Query { v2: None, .. })) if n == V1_LEN => {}
                    Ok(other) => panic!("{n} octets of {m:?} parsed as {other:?}"),
                }
            }
        }
        for n in 0..V2_REPORT.len() {
            let mut b = V2_REPORT[..n].to_vec();
            refill(&mut b, V2_ROUTERS);
            assert!(MldMessage::parse(&b, src(), V2_ROUTERS).is_err(), "{n}");
        }
    }

    #[test]
    fn bad_checksum_rejected() {
        for m in all_kinds() {
            let mut b = emit_vec(&m, ALL_NODES);
            b[3] ^= 0x80;
            assert_eq!(
                MldMessage::parse(&b, src(), ALL_NODES),
                Err(Error::Checksum)
            );
            b[3] ^= 0x80;
            assert_eq!(
                MldMessage::parse(&b, a("fe80::2"), ALL_NODES),
                Err(Error::Checksum)
            );
        }
    }

    #[test]
    fn odd_lengths_and_types() {
        let d = ALL_NODES;
        // Query of 26 octets: ignored (RFC 3810 8.1).
        let mut b = vec![0u8; 26];
        b[0] = TYPE_QUERY;
        refill(&mut b, d);
        assert!(matches!(
            MldMessage::parse(&b, src(), d),
            Err(Error::Malformed(_))
        ));
        // Echo request is not MLD.
        let mut b = vec![128u8, 0, 0, 0, 0, 0, 0, 0];
        refill(&mut b, d);
        assert!(matches!(
            MldMessage::parse(&b, src(), d),
            Err(Error::Unsupported(_))
        ));
        // A v2 report claiming 65535 records in 8 octets.
        let mut b = vec![143u8, 0, 0, 0, 0, 0, 0xff, 0xff];
        refill(&mut b, d);
        assert_eq!(MldMessage::parse(&b, src(), d), Err(Error::Truncated));
        // A v1 report with trailing octets: ignored.
        let g = a("ff02::fb");
        let mut b = emit_vec(&MldMessage::ReportV1 { group: g }, d);
        b.extend_from_slice(&[1, 2, 3]);
        refill(&mut b, d);
        assert_eq!(
            MldMessage::parse(&b, src(), d),
            Ok(MldMessage::ReportV1 { group: g })
        );
        let q = MldMessage::Query(Query {
            max_resp_code: 1,
            group: Ipv6Addr::UNSPECIFIED,
            v2: Some(QueryV2 {
                qrv: 9,
                ..QueryV2::default()
            }),
        });
        assert!(matches!(
            q.emit(src(), d, &mut [0; 64]),
            Err(Error::Malformed(_))
        ));
    }
}
