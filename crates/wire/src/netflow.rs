//! NetFlow v9 (RFC 3954) and IPFIX (RFC 7011) flow export messages.
//!
//! [`MessageBuilder`] writes one export message (one UDP datagram) into a
//! caller's buffer: the header, optionally the template set (one IPv4 and
//! one IPv6 template, [`TEMPLATE_V4`] and [`TEMPLATE_V6`]), then as many
//! data records as fit, grouped into data sets by template and padded to
//! four octets. [`Decoder`] reads such messages back (learning templates
//! from template sets, any exporter's, not only ours); it is for tests, the
//! fuzz target and debugging, and returns an [`Error`] rather than
//! panicking on any input.
//!
//! Both versions carry the same fields; the element ids are the IANA
//! IPFIX ids, which for ids below 128 are also the NetFlow v9 field types:
//!
//! | id | v9 name | IPFIX name | octets |
//! |---|---|---|---|
//! | 1 | IN_BYTES | octetDeltaCount | 8 |
//! | 2 | IN_PKTS | packetDeltaCount | 8 |
//! | 4 | PROTOCOL | protocolIdentifier | 1 |
//! | 5 | SRC_TOS | ipClassOfService | 1 |
//! | 6 | TCP_FLAGS | tcpControlBits | 1 (v9) / 2 (IPFIX, RFC 7125) |
//! | 7 | L4_SRC_PORT | sourceTransportPort | 2 |
//! | 8 / 27 | IPV4_SRC_ADDR / IPV6_SRC_ADDR | sourceIPv4Address / sourceIPv6Address | 4 / 16 |
//! | 10 | INPUT_SNMP | ingressInterface | 4 |
//! | 11 | L4_DST_PORT | destinationTransportPort | 2 |
//! | 12 / 28 | IPV4_DST_ADDR / IPV6_DST_ADDR | destinationIPv4Address / destinationIPv6Address | 4 / 16 |
//! | 14 | OUTPUT_SNMP | egressInterface | 4 |
//! | 58 | SRC_VLAN | vlanId | 2 |
//! | 21, 22 | LAST_SWITCHED, FIRST_SWITCHED (sysUptime ms) | — | 4 |
//! | 152, 153 | — | flowStartMilliseconds, flowEndMilliseconds | 8 |
//! | 136 | flowEndReason | flowEndReason | 1 |
//!
//! Record times ([`ExportRecord::first_ms`], `last_ms`) are Unix epoch
//! milliseconds in both versions. NetFlow v9 carries them relative to the
//! exporter's boot time, which a collector computes as
//! `unix_secs × 1000 − sysUptime`; the builder uses exactly that value
//! (from the [`Header`] it was given) so that times survive the round trip
//! to the millisecond: exporters should choose `sys_uptime_ms` as
//! `unix_secs × 1000 − boot_ms` for a fixed `boot_ms`.

use crate::{Error, Result};

/// Export protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// NetFlow version 9 (RFC 3954).
    V9,
    /// IPFIX (RFC 7011), "version 10".
    Ipfix,
}

/// Template id of the IPv4 record.
pub const TEMPLATE_V4: u16 = 256;
/// Template id of the IPv6 record.
pub const TEMPLATE_V6: u16 = 257;
/// Template id of the IPv4 usage record (IPFIX only; see
/// [`MessageBuilder::add_usage_record`]).
pub const TEMPLATE_USAGE_V4: u16 = 258;
/// Template id of the IPv6 usage record.
pub const TEMPLATE_USAGE_V6: u16 = 259;
/// Longest name a usage record carries (longer ones are cut at a UTF-8
/// character boundary).
pub const MAX_NAME: usize = 64;
/// Length of a variable-length field in an IPFIX template (RFC 7011 §7).
const VARIABLE: u16 = u16::MAX;
/// Default message size: fits a 1500-byte MTU with IPv6 and UDP headers
/// to spare.
pub const DEFAULT_MTU: usize = 1400;
/// NetFlow v9 header length.
pub const V9_HEADER_LEN: usize = 20;
/// IPFIX message header length.
pub const IPFIX_HEADER_LEN: usize = 16;

/// Information element ids (IANA "IPFIX Information Elements"; the same
/// numbers as NetFlow v9 field types below 128).
pub mod ie {
    /// octetDeltaCount / IN_BYTES.
    pub const OCTETS: u16 = 1;
    /// packetDeltaCount / IN_PKTS.
    pub const PACKETS: u16 = 2;
    /// protocolIdentifier / PROTOCOL.
    pub const PROTOCOL: u16 = 4;
    /// ipClassOfService / SRC_TOS.
    pub const TOS: u16 = 5;
    /// tcpControlBits / TCP_FLAGS.
    pub const TCP_FLAGS: u16 = 6;
    /// sourceTransportPort / L4_SRC_PORT.
    pub const SRC_PORT: u16 = 7;
    /// sourceIPv4Address / IPV4_SRC_ADDR.
    pub const SRC_V4: u16 = 8;
    /// ingressInterface / INPUT_SNMP.
    pub const IN_IF: u16 = 10;
    /// destinationTransportPort / L4_DST_PORT.
    pub const DST_PORT: u16 = 11;
    /// destinationIPv4Address / IPV4_DST_ADDR.
    pub const DST_V4: u16 = 12;
    /// egressInterface / OUTPUT_SNMP.
    pub const OUT_IF: u16 = 14;
    /// flowEndSysUpTime / LAST_SWITCHED.
    pub const LAST_SWITCHED: u16 = 21;
    /// flowStartSysUpTime / FIRST_SWITCHED.
    pub const FIRST_SWITCHED: u16 = 22;
    /// sourceIPv6Address / IPV6_SRC_ADDR.
    pub const SRC_V6: u16 = 27;
    /// destinationIPv6Address / IPV6_DST_ADDR.
    pub const DST_V6: u16 = 28;
    /// vlanId / SRC_VLAN.
    pub const VLAN: u16 = 58;
    /// flowEndReason.
    pub const END_REASON: u16 = 136;
    /// flowStartSeconds (decoded only).
    pub const START_SECONDS: u16 = 150;
    /// flowEndSeconds (decoded only).
    pub const END_SECONDS: u16 = 151;
    /// flowStartMilliseconds.
    pub const START_MS: u16 = 152;
    /// flowEndMilliseconds.
    pub const END_MS: u16 = 153;
    /// applicationName (string): the application a classifier named.
    pub const APPLICATION_NAME: u16 = 96;
    /// applicationCategoryName (string): the service it belongs to.
    pub const APPLICATION_CATEGORY_NAME: u16 = 372;
    /// userName (string): the subscriber.
    pub const USER_NAME: u16 = 371;
}

/// flowEndReason values (IANA).
pub mod end_reason {
    /// Idle (inactive) timeout.
    pub const IDLE_TIMEOUT: u8 = 1;
    /// Active timeout.
    pub const ACTIVE_TIMEOUT: u8 = 2;
    /// End of flow detected (e.g. TCP FIN).
    pub const END_OF_FLOW: u8 = 3;
    /// Forced end (shutdown, cache flush).
    pub const FORCED_END: u8 = 4;
    /// Lack of resources.
    pub const LACK_OF_RESOURCES: u8 = 5;
}

type Fields = &'static [(u16, u16)];

const V9_V4: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::TOS, 1),
    (ie::TCP_FLAGS, 1),
    (ie::SRC_PORT, 2),
    (ie::SRC_V4, 4),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V4, 4),
    (ie::OUT_IF, 4),
    (ie::LAST_SWITCHED, 4),
    (ie::FIRST_SWITCHED, 4),
    (ie::VLAN, 2),
    (ie::END_REASON, 1),
];
const V9_V6: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::TOS, 1),
    (ie::TCP_FLAGS, 1),
    (ie::SRC_PORT, 2),
    (ie::SRC_V6, 16),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V6, 16),
    (ie::OUT_IF, 4),
    (ie::LAST_SWITCHED, 4),
    (ie::FIRST_SWITCHED, 4),
    (ie::VLAN, 2),
    (ie::END_REASON, 1),
];
const IPFIX_V4: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::TOS, 1),
    (ie::TCP_FLAGS, 2),
    (ie::SRC_PORT, 2),
    (ie::SRC_V4, 4),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V4, 4),
    (ie::OUT_IF, 4),
    (ie::VLAN, 2),
    (ie::START_MS, 8),
    (ie::END_MS, 8),
    (ie::END_REASON, 1),
];
const IPFIX_V6: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::TOS, 1),
    (ie::TCP_FLAGS, 2),
    (ie::SRC_PORT, 2),
    (ie::SRC_V6, 16),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V6, 16),
    (ie::OUT_IF, 4),
    (ie::VLAN, 2),
    (ie::START_MS, 8),
    (ie::END_MS, 8),
    (ie::END_REASON, 1),
];

/// Usage records (inline service control, docs/inline.md): one direction of
/// a classified flow with its application, service and subscriber as
/// variable-length strings; the standard fields come first so that any
/// collector reads the flow even if it skips the names.
const USAGE_V4: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::SRC_PORT, 2),
    (ie::SRC_V4, 4),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V4, 4),
    (ie::OUT_IF, 4),
    (ie::START_MS, 8),
    (ie::END_MS, 8),
    (ie::END_REASON, 1),
    (ie::APPLICATION_NAME, VARIABLE),
    (ie::APPLICATION_CATEGORY_NAME, VARIABLE),
    (ie::USER_NAME, VARIABLE),
];
const USAGE_V6: Fields = &[
    (ie::OCTETS, 8),
    (ie::PACKETS, 8),
    (ie::PROTOCOL, 1),
    (ie::SRC_PORT, 2),
    (ie::SRC_V6, 16),
    (ie::IN_IF, 4),
    (ie::DST_PORT, 2),
    (ie::DST_V6, 16),
    (ie::OUT_IF, 4),
    (ie::START_MS, 8),
    (ie::END_MS, 8),
    (ie::END_REASON, 1),
    (ie::APPLICATION_NAME, VARIABLE),
    (ie::APPLICATION_CATEGORY_NAME, VARIABLE),
    (ie::USER_NAME, VARIABLE),
];

/// The names a usage record carries (empty: none known).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageNames<'a> {
    /// applicationName.
    pub application: &'a str,
    /// applicationCategoryName (Lanyard: the service).
    pub service: &'a str,
    /// userName (Lanyard: the subscriber id).
    pub subscriber: &'a str,
}

/// `s` cut to at most [`MAX_NAME`] octets at a character boundary.
fn name_bytes(s: &str) -> &[u8] {
    let mut end = s.len().min(MAX_NAME);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s.as_bytes()[..end]
}

/// The fields of our template for `version` and address `family` (6 for
/// IPv6, anything else IPv4), as (element id, length).
pub fn template_fields(version: Version, family: u8) -> &'static [(u16, u16)] {
    match (version, family == 6) {
        (Version::V9, false) => V9_V4,
        (Version::V9, true) => V9_V6,
        (Version::Ipfix, false) => IPFIX_V4,
        (Version::Ipfix, true) => IPFIX_V6,
    }
}

fn record_len(fields: Fields) -> usize {
    fields.iter().map(|&(_, l)| usize::from(l)).sum()
}

/// One flow record as exported; no dependency on the flow cache's types.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct ExportRecord {
    /// Source address; IPv4 in the low 32 bits.
    pub src_ip: u128,
    /// Destination address; IPv4 in the low 32 bits.
    pub dst_ip: u128,
    /// 4 or 6 (encoding treats anything but 6 as IPv4).
    pub family: u8,
    /// Transport source port (0 when none).
    pub src_port: u16,
    /// Transport destination port (0 when none).
    pub dst_port: u16,
    /// IP protocol / next header.
    pub proto: u8,
    /// IPv4 TOS / IPv6 traffic class octet.
    pub tos: u8,
    /// OR of the TCP flags seen.
    pub tcp_flags: u8,
    /// Ingress interface index (0 = unknown).
    pub in_if: u32,
    /// Egress interface index (0 = unknown).
    pub out_if: u32,
    /// VLAN id (0 = none).
    pub vlan: u16,
    /// Packets.
    pub packets: u64,
    /// Octets (layer 3).
    pub bytes: u64,
    /// First packet, Unix epoch milliseconds.
    pub first_ms: u64,
    /// Last packet, Unix epoch milliseconds.
    pub last_ms: u64,
    /// flowEndReason ([`end_reason`]), 0 = not given.
    pub end_reason: u8,
}

/// What goes into a message header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Header {
    /// Export time, Unix seconds.
    pub unix_secs: u32,
    /// NetFlow v9 only: milliseconds since the exporter's boot time.
    pub sys_uptime_ms: u32,
    /// v9: export packets sent before this one; IPFIX: data records sent
    /// before this message (both modulo 2^32).
    pub sequence: u32,
    /// v9 source id / IPFIX observation domain id.
    pub domain_id: u32,
}

impl Header {
    /// v9 boot time (Unix ms) as collectors derive it.
    fn boot_ms(&self) -> i64 {
        i64::from(self.unix_secs) * 1000 - i64::from(self.sys_uptime_ms)
    }
}

fn put(buf: &mut [u8], v: u64, len: usize) {
    let b = v.to_be_bytes();
    buf[..len].copy_from_slice(&b[8 - len..]);
}

fn put16(buf: &mut [u8], v: u16) {
    buf[..2].copy_from_slice(&v.to_be_bytes());
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// Writes one export message into a buffer. See the module docs.
#[derive(Debug)]
pub struct MessageBuilder<'a> {
    buf: &'a mut [u8],
    version: Version,
    header: Header,
    len: usize,
    /// Open data set: its start and template id.
    set: Option<(usize, u16)>,
    /// v9 header count: template and data records.
    count: u16,
    data_records: u32,
}

impl<'a> MessageBuilder<'a> {
    /// Starts a message in `buf`; the message may use all of `buf` (pass
    /// `&mut buf[..mtu]`). [`Error::Truncated`] if the header does not fit.
    pub fn new(version: Version, buf: &'a mut [u8], header: &Header) -> Result<MessageBuilder<'a>> {
        let len = match version {
            Version::V9 => V9_HEADER_LEN,
            Version::Ipfix => IPFIX_HEADER_LEN,
        };
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        // Lengths are 16-bit.
        let cap = buf.len().min(usize::from(u16::MAX));
        Ok(MessageBuilder {
            buf: &mut buf[..cap],
            version,
            header: *header,
            len,
            set: None,
            count: 0,
            data_records: 0,
        })
    }

    fn close_set(&mut self) {
        if let Some((start, _)) = self.set.take() {
            let pad = pad4(self.len - start);
            self.buf[self.len..self.len + pad].fill(0);
            self.len += pad;
            put16(&mut self.buf[start + 2..], (self.len - start) as u16);
        }
    }

    /// Appends the template set (IPv4 and IPv6 templates).
    /// [`Error::Truncated`] if it does not fit (nothing written then).
    pub fn add_templates(&mut self) -> Result<()> {
        match self.version {
            Version::V9 => self.write_templates(0, &[(TEMPLATE_V4, V9_V4), (TEMPLATE_V6, V9_V6)]),
            Version::Ipfix => {
                self.write_templates(2, &[(TEMPLATE_V4, IPFIX_V4), (TEMPLATE_V6, IPFIX_V6)])
            }
        }
    }

    /// Appends the usage-record template set (IPv4 and IPv6; IPFIX only:
    /// NetFlow v9 has no variable-length fields, [`Error::Unsupported`]).
    pub fn add_usage_templates(&mut self) -> Result<()> {
        if self.version != Version::Ipfix {
            return Err(Error::Unsupported("usage records need IPFIX"));
        }
        self.write_templates(
            2,
            &[(TEMPLATE_USAGE_V4, USAGE_V4), (TEMPLATE_USAGE_V6, USAGE_V6)],
        )
    }

    fn write_templates(&mut self, set_id: u16, list: &[(u16, Fields)]) -> Result<()> {
        let open_pad = self.set.map_or(0, |(s, _)| pad4(self.len - s));
        let size = 4 + list.iter().map(|(_, f)| 4 + 4 * f.len()).sum::<usize>();
        if self.len + open_pad + size > self.buf.len() {
            return Err(Error::Truncated);
        }
        self.close_set();
        let start = self.len;
        put16(&mut self.buf[start..], set_id);
        put16(&mut self.buf[start + 2..], size as u16);
        let mut at = start + 4;
        for &(id, fields) in list {
            put16(&mut self.buf[at..], id);
            put16(&mut self.buf[at + 2..], fields.len() as u16);
            at += 4;
            for &(ie, l) in fields {
                put16(&mut self.buf[at..], ie);
                put16(&mut self.buf[at + 2..], l);
                at += 4;
            }
        }
        self.len = at;
        self.count = self.count.saturating_add(list.len() as u16);
        Ok(())
    }

    /// Appends one data record; `false` (nothing written) when it does not
    /// fit: finish this message and start another.
    pub fn add_record(&mut self, r: &ExportRecord) -> bool {
        let fields = template_fields(self.version, r.family);
        let template = if r.family == 6 {
            TEMPLATE_V6
        } else {
            TEMPLATE_V4
        };
        self.put_record(template, fields, r, &UsageNames::default())
    }

    /// Appends one usage record (after [`MessageBuilder::add_usage_templates`]
    /// in this message or an earlier one): the flow fields of `r` that the
    /// usage template has, and `names` (each cut to [`MAX_NAME`] octets).
    /// `false` when it does not fit, or with NetFlow v9.
    pub fn add_usage_record(&mut self, r: &ExportRecord, names: &UsageNames) -> bool {
        if self.version != Version::Ipfix {
            return false;
        }
        let (template, fields) = if r.family == 6 {
            (TEMPLATE_USAGE_V6, USAGE_V6)
        } else {
            (TEMPLATE_USAGE_V4, USAGE_V4)
        };
        self.put_record(template, fields, r, names)
    }

    fn put_record(
        &mut self,
        template: u16,
        fields: Fields,
        r: &ExportRecord,
        names: &UsageNames,
    ) -> bool {
        let name = |ie: u16| match ie {
            ie::APPLICATION_NAME => name_bytes(names.application),
            ie::APPLICATION_CATEGORY_NAME => name_bytes(names.service),
            ie::USER_NAME => name_bytes(names.subscriber),
            _ => &[],
        };
        // Variable-length fields: a one-octet length (names are short).
        let rlen: usize = fields
            .iter()
            .map(|&(ie, l)| {
                if l == VARIABLE {
                    1 + name(ie).len()
                } else {
                    usize::from(l)
                }
            })
            .sum();
        let (need_set, start_after, open_pad) = match self.set {
            Some((s, t)) if t == template => (false, s, 0),
            Some((s, _)) => (true, 0, pad4(self.len - s)),
            None => (true, 0, 0),
        };
        // Room for the record and the padding that closes its set.
        let end = if need_set {
            let s = self.len + open_pad;
            s + 4 + rlen + pad4(4 + rlen)
        } else {
            let e = self.len + rlen;
            e + pad4(e - start_after)
        };
        if end > self.buf.len() || self.data_records == u32::MAX || self.count == u16::MAX {
            return false;
        }
        if need_set {
            self.close_set();
            let s = self.len;
            put16(&mut self.buf[s..], template);
            self.set = Some((s, template));
            self.len += 4;
        }
        let boot = self.header.boot_ms();
        let rel = |t: u64| (i64::try_from(t).unwrap_or(i64::MAX).wrapping_sub(boot)) as u32;
        let mut at = self.len;
        for &(ie, l) in fields {
            if l == VARIABLE {
                let v = name(ie);
                self.buf[at] = v.len() as u8;
                self.buf[at + 1..at + 1 + v.len()].copy_from_slice(v);
                at += 1 + v.len();
                continue;
            }
            let l = usize::from(l);
            let out = &mut self.buf[at..at + l];
            match ie {
                ie::SRC_V4 | ie::SRC_V6 => out.copy_from_slice(&r.src_ip.to_be_bytes()[16 - l..]),
                ie::DST_V4 | ie::DST_V6 => out.copy_from_slice(&r.dst_ip.to_be_bytes()[16 - l..]),
                _ => {
                    let v = match ie {
                        ie::OCTETS => r.bytes,
                        ie::PACKETS => r.packets,
                        ie::PROTOCOL => r.proto.into(),
                        ie::TOS => r.tos.into(),
                        ie::TCP_FLAGS => r.tcp_flags.into(),
                        ie::SRC_PORT => r.src_port.into(),
                        ie::DST_PORT => r.dst_port.into(),
                        ie::IN_IF => r.in_if.into(),
                        ie::OUT_IF => r.out_if.into(),
                        ie::VLAN => r.vlan.into(),
                        ie::END_REASON => r.end_reason.into(),
                        ie::FIRST_SWITCHED => rel(r.first_ms).into(),
                        ie::LAST_SWITCHED => rel(r.last_ms).into(),
                        ie::START_MS => r.first_ms,
                        ie::END_MS => r.last_ms,
                        _ => 0,
                    };
                    put(out, v, l);
                }
            }
            at += l;
        }
        self.len = at;
        self.count += 1;
        self.data_records += 1;
        true
    }

    /// Data records added so far.
    pub fn data_records(&self) -> u32 {
        self.data_records
    }

    /// Octets written so far (before the closing padding).
    pub fn len(&self) -> usize {
        self.len
    }

    /// No set added yet.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Closes the open set and writes the header; returns the message
    /// length (`buf[..len]` is the datagram).
    pub fn finish(mut self) -> usize {
        self.close_set();
        let h = self.header;
        let b = &mut *self.buf;
        match self.version {
            Version::V9 => {
                put16(b, 9);
                put16(&mut b[2..], self.count);
                b[4..8].copy_from_slice(&h.sys_uptime_ms.to_be_bytes());
                b[8..12].copy_from_slice(&h.unix_secs.to_be_bytes());
                b[12..16].copy_from_slice(&h.sequence.to_be_bytes());
                b[16..20].copy_from_slice(&h.domain_id.to_be_bytes());
            }
            Version::Ipfix => {
                put16(b, 10);
                put16(&mut b[2..], self.len as u16);
                b[4..8].copy_from_slice(&h.unix_secs.to_be_bytes());
                b[8..12].copy_from_slice(&h.sequence.to_be_bytes());
                b[12..16].copy_from_slice(&h.domain_id.to_be_bytes());
            }
        }
        self.len
    }
}

/// Records of our template for `version`/`family` that fit in one message
/// of `mtu` octets (after a template set if `with_templates`), when all
/// have the same family.
pub fn records_per_message(
    version: Version,
    family: u8,
    mtu: usize,
    with_templates: bool,
) -> usize {
    let (hdr, t) = match version {
        Version::V9 => (V9_HEADER_LEN, (V9_V4, V9_V6)),
        Version::Ipfix => (IPFIX_HEADER_LEN, (IPFIX_V4, IPFIX_V6)),
    };
    let tl = if with_templates {
        12 + 4 * (t.0.len() + t.1.len())
    } else {
        0
    };
    let rl = record_len(template_fields(version, family));
    let room = mtu.min(usize::from(u16::MAX)).saturating_sub(hdr + tl + 4);
    let n = room / rl;
    if n > 0 && n * rl + pad4(4 + n * rl) > room {
        n - 1
    } else {
        n
    }
}

/// One template field as decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TemplateField {
    /// Element id (without the enterprise bit).
    pub id: u16,
    /// Length; 65535 = variable (IPFIX).
    pub len: u16,
    /// Enterprise number (IPFIX), 0 for IANA elements.
    pub enterprise: u32,
}

#[derive(Debug, Clone)]
struct Template {
    version: Version,
    domain: u32,
    id: u16,
    fields: Vec<TemplateField>,
    /// Smallest record length (variable fields count 1).
    min_len: usize,
}

/// A decoded message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// `None` only in `Default`.
    pub version: Option<Version>,
    /// Header fields (`sys_uptime_ms` is 0 for IPFIX).
    pub header: Header,
    /// v9 header record count (IPFIX: 0).
    pub count: u16,
    /// Template ids defined (or withdrawn) in this message.
    pub templates: Vec<u16>,
    /// Data records whose template was known.
    pub records: Vec<ExportRecord>,
    /// Data sets skipped: unknown template, options data.
    pub skipped_sets: u32,
    /// String fields of the records, as (index in `records`, element id,
    /// value): applicationName, applicationCategoryName, userName.
    pub names: Vec<(usize, u16, String)>,
}

/// Most templates a [`Decoder`] keeps.
pub const MAX_TEMPLATES: usize = 1024;

/// Decodes export messages, remembering templates across messages (per
/// version, domain and template id). Options templates and their data are
/// skipped; enterprise-specific elements are skipped.
#[derive(Debug, Clone, Default)]
pub struct Decoder {
    templates: Vec<Template>,
}

fn be(b: &[u8]) -> u64 {
    b.iter().fold(0, |a, &x| a << 8 | u64::from(x))
}

fn rd16(b: &[u8], at: usize) -> Result<u16> {
    b.get(at..at + 2)
        .map(|s| u16::from_be_bytes([s[0], s[1]]))
        .ok_or(Error::Truncated)
}

fn rd32(b: &[u8], at: usize) -> Result<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
        .ok_or(Error::Truncated)
}

impl Decoder {
    /// A decoder that knows no templates.
    pub fn new() -> Decoder {
        Decoder::default()
    }

    /// A decoder that already knows Lanyard's templates for `version`
    /// and `domain_id` (to read data-only messages).
    pub fn with_lanyard_templates(version: Version, domain_id: u32) -> Decoder {
        let mut d = Decoder::new();
        for (id, fam) in [(TEMPLATE_V4, 4), (TEMPLATE_V6, 6)] {
            let fields = template_fields(version, fam)
                .iter()
                .map(|&(id, len)| TemplateField {
                    id,
                    len,
                    enterprise: 0,
                })
                .collect();
            d.learn(version, domain_id, id, fields);
        }
        if version == Version::Ipfix {
            for (id, fields) in [(TEMPLATE_USAGE_V4, USAGE_V4), (TEMPLATE_USAGE_V6, USAGE_V6)] {
                let fields = fields
                    .iter()
                    .map(|&(id, len)| TemplateField {
                        id,
                        len,
                        enterprise: 0,
                    })
                    .collect();
                d.learn(version, domain_id, id, fields);
            }
        }
        d
    }

    /// Templates known.
    pub fn template_count(&self) -> usize {
        self.templates.len()
    }

    fn learn(&mut self, version: Version, domain: u32, id: u16, fields: Vec<TemplateField>) {
        let min_len = fields
            .iter()
            .map(|f| {
                if f.len == u16::MAX && version == Version::Ipfix {
                    1
                } else {
                    usize::from(f.len)
                }
            })
            .sum();
        let t = Template {
            version,
            domain,
            id,
            fields,
            min_len,
        };
        match self.find(version, domain, id) {
            Some(i) => self.templates[i] = t,
            None if self.templates.len() < MAX_TEMPLATES => self.templates.push(t),
            None => {}
        }
    }

    fn find(&self, version: Version, domain: u32, id: u16) -> Option<usize> {
        self.templates
            .iter()
            .position(|t| t.version == version && t.domain == domain && t.id == id)
    }

    /// Decodes one message (one datagram).
    pub fn decode(&mut self, msg: &[u8]) -> Result<Message> {
        let version = match rd16(msg, 0)? {
            9 => Version::V9,
            10 => Version::Ipfix,
            _ => return Err(Error::Unsupported("export version")),
        };
        let mut m = Message {
            version: Some(version),
            ..Message::default()
        };
        let (body, mut at) = match version {
            Version::V9 => {
                if msg.len() < V9_HEADER_LEN {
                    return Err(Error::Truncated);
                }
                m.count = rd16(msg, 2)?;
                m.header = Header {
                    sys_uptime_ms: rd32(msg, 4)?,
                    unix_secs: rd32(msg, 8)?,
                    sequence: rd32(msg, 12)?,
                    domain_id: rd32(msg, 16)?,
                };
                (msg, V9_HEADER_LEN)
            }
            Version::Ipfix => {
                if msg.len() < IPFIX_HEADER_LEN {
                    return Err(Error::Truncated);
                }
                let len = usize::from(rd16(msg, 2)?);
                if len < IPFIX_HEADER_LEN {
                    return Err(Error::Malformed("IPFIX message length"));
                }
                if len > msg.len() {
                    return Err(Error::Truncated);
                }
                m.header = Header {
                    sys_uptime_ms: 0,
                    unix_secs: rd32(msg, 4)?,
                    sequence: rd32(msg, 8)?,
                    domain_id: rd32(msg, 12)?,
                };
                (&msg[..len], IPFIX_HEADER_LEN)
            }
        };
        while at < body.len() {
            let set_id = rd16(body, at)?;
            let set_len = usize::from(rd16(body, at + 2)?);
            if set_len < 4 {
                return Err(Error::Malformed("set length"));
            }
            let set = body.get(at + 4..at + set_len).ok_or(Error::Truncated)?;
            match (version, set_id) {
                (Version::V9, 0) | (Version::Ipfix, 2) => {
                    self.template_set(version, set, &mut m)?
                }
                (_, 256..) => self.data_set(version, set_id, set, &mut m)?,
                _ => m.skipped_sets += 1, // options templates, reserved
            }
            at += set_len;
        }
        Ok(m)
    }

    fn template_set(&mut self, version: Version, set: &[u8], m: &mut Message) -> Result<()> {
        let domain = m.header.domain_id;
        let mut at = 0;
        // Fewer than 4 octets left: padding.
        while set.len() - at >= 4 {
            let id = rd16(set, at)?;
            let n = usize::from(rd16(set, at + 2)?);
            at += 4;
            if id < 256 {
                return Err(Error::Malformed("template id"));
            }
            if n == 0 {
                // IPFIX template withdrawal (v9: an empty template).
                if let Some(i) = self.find(version, domain, id) {
                    self.templates.swap_remove(i);
                }
                m.templates.push(id);
                continue;
            }
            let mut fields = Vec::with_capacity(n.min(set.len() / 4));
            for _ in 0..n {
                let raw = rd16(set, at)?;
                let len = rd16(set, at + 2)?;
                at += 4;
                let mut enterprise = 0;
                if version == Version::Ipfix && raw & 0x8000 != 0 {
                    enterprise = rd32(set, at)?;
                    at += 4;
                }
                fields.push(TemplateField {
                    id: raw
                        & if version == Version::Ipfix {
                            0x7fff
                        } else {
                            0xffff
                        },
                    len,
                    enterprise,
                });
            }
            if fields.iter().all(|f| f.len == 0) {
                return Err(Error::Malformed("template of empty records"));
            }
            self.learn(version, domain, id, fields);
            m.templates.push(id);
        }
        Ok(())
    }

    fn data_set(&mut self, version: Version, id: u16, set: &[u8], m: &mut Message) -> Result<()> {
        let Some(t) = self.find(version, m.header.domain_id, id) else {
            m.skipped_sets += 1;
            return Ok(());
        };
        let t = &self.templates[t];
        let boot = m.header.boot_ms();
        let mut at = 0;
        // Fewer octets left than the smallest record: padding.
        while set.len() - at >= t.min_len.max(1) {
            let mut r = ExportRecord::default();
            for f in &t.fields {
                let mut len = usize::from(f.len);
                if f.len == u16::MAX && version == Version::Ipfix {
                    let l = usize::from(*set.get(at).ok_or(Error::Truncated)?);
                    at += 1;
                    len = if l == 255 {
                        let l = rd16(set, at)?;
                        at += 2;
                        usize::from(l)
                    } else {
                        l
                    };
                }
                let v = set.get(at..at + len).ok_or(Error::Truncated)?;
                at += len;
                if f.enterprise != 0 {
                    continue;
                }
                if matches!(
                    f.id,
                    ie::APPLICATION_NAME | ie::APPLICATION_CATEGORY_NAME | ie::USER_NAME
                ) {
                    let n = String::from_utf8_lossy(v).into_owned();
                    m.names.push((m.records.len(), f.id, n));
                    continue;
                }
                let addr = |v: &[u8]| v.iter().fold(0u128, |a, &x| a << 8 | u128::from(x));
                match (f.id, len) {
                    (ie::SRC_V4, 4) => (r.src_ip, r.family) = (addr(v), 4),
                    (ie::DST_V4, 4) => (r.dst_ip, r.family) = (addr(v), 4),
                    (ie::SRC_V6, 16) => (r.src_ip, r.family) = (addr(v), 6),
                    (ie::DST_V6, 16) => (r.dst_ip, r.family) = (addr(v), 6),
                    (_, 1..=8) => {
                        let x = be(v);
                        let abs = |rel: u64| (boot + rel as i64).max(0) as u64;
                        match f.id {
                            ie::OCTETS => r.bytes = x,
                            ie::PACKETS => r.packets = x,
                            ie::PROTOCOL => r.proto = x as u8,
                            ie::TOS => r.tos = x as u8,
                            ie::TCP_FLAGS => r.tcp_flags = x as u8,
                            ie::SRC_PORT => r.src_port = x as u16,
                            ie::DST_PORT => r.dst_port = x as u16,
                            ie::IN_IF => r.in_if = x as u32,
                            ie::OUT_IF => r.out_if = x as u32,
                            ie::VLAN => r.vlan = x as u16,
                            ie::END_REASON => r.end_reason = x as u8,
                            ie::FIRST_SWITCHED if version == Version::V9 => {
                                r.first_ms = abs(x & 0xffff_ffff)
                            }
                            ie::LAST_SWITCHED if version == Version::V9 => {
                                r.last_ms = abs(x & 0xffff_ffff)
                            }
                            ie::START_SECONDS => r.first_ms = x.saturating_mul(1000),
                            ie::END_SECONDS => r.last_ms = x.saturating_mul(1000),
                            ie::START_MS => r.first_ms = x,
                            ie::END_MS => r.last_ms = x,
                            _ => {}
                        }
                    }
                    _ => {}
                }
            }
            m.records.push(r);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: u64 = 1_700_000_123_456;
    const BOOT_MS: u64 = 1_699_999_000_000;

    fn header(seq: u32) -> Header {
        let unix_secs = (NOW_MS / 1000) as u32;
        Header {
            unix_secs,
            sys_uptime_ms: (u64::from(unix_secs) * 1000 - BOOT_MS) as u32,
            sequence: seq,
            domain_id: 7,
        }
    }

    fn v4(i: u32) -> ExportRecord {
        ExportRecord {
            src_ip: u128::from(0x0a00_0001 + i),
            dst_ip: 0xc0a8_0101,
            family: 4,
            src_port: 40_000 + i as u16,
            dst_port: 443,
            proto: 6,
            tos: 0x28,
            tcp_flags: 0x1b,
            in_if: 1,
            out_if: 3,
            vlan: 100,
            packets: 10 + u64::from(i),
            bytes: (1 << 33) + u64::from(i),
            first_ms: NOW_MS - 5000,
            last_ms: NOW_MS - 10,
            end_reason: end_reason::IDLE_TIMEOUT,
        }
    }

    fn v6(i: u32) -> ExportRecord {
        ExportRecord {
            src_ip: 0x2001_0db8_0000_0000_0000_0000_0000_0001 + u128::from(i),
            dst_ip: 0x2001_0db8_ffff_0000_0000_0000_0000_0002,
            family: 6,
            src_port: 5353,
            dst_port: 53,
            proto: 17,
            tos: 0,
            tcp_flags: 0,
            in_if: 2,
            out_if: 0,
            vlan: 0,
            packets: 1,
            bytes: 80 + u64::from(i),
            first_ms: NOW_MS - 100,
            last_ms: NOW_MS - 100,
            end_reason: end_reason::FORCED_END,
        }
    }

    fn build(version: Version, recs: &[ExportRecord], templates: bool) -> Vec<u8> {
        let mut buf = [0u8; DEFAULT_MTU];
        let mut b = MessageBuilder::new(version, &mut buf, &header(42)).unwrap();
        if templates {
            b.add_templates().unwrap();
        }
        for r in recs {
            assert!(b.add_record(r));
        }
        let n = b.finish();
        buf[..n].to_vec()
    }

    #[test]
    fn round_trip_both_versions() {
        for version in [Version::V9, Version::Ipfix] {
            let recs = [v4(0), v6(0), v6(1), v4(1), v4(2)];
            let msg = build(version, &recs, true);
            assert_eq!(msg.len() % 4, 0);
            let mut d = Decoder::new();
            let m = d.decode(&msg).unwrap();
            assert_eq!(m.version, Some(version));
            assert_eq!(m.templates, vec![TEMPLATE_V4, TEMPLATE_V6]);
            assert_eq!(m.records, recs, "{version:?}");
            assert_eq!(
                m.header,
                Header {
                    sys_uptime_ms: if version == Version::V9 {
                        header(0).sys_uptime_ms
                    } else {
                        0
                    },
                    ..header(42)
                }
            );
            match version {
                Version::V9 => {
                    assert_eq!(&msg[..2], &[0, 9]);
                    assert_eq!(m.count, 7);
                }
                Version::Ipfix => {
                    assert_eq!(&msg[..2], &[0, 10]);
                    assert_eq!(usize::from(u16::from_be_bytes([msg[2], msg[3]])), msg.len());
                }
            }
            // Data-only message with templates already known.
            let msg = build(version, &recs[..2], false);
            assert_eq!(d.decode(&msg).unwrap().records, &recs[..2]);
            let mut fresh = Decoder::new();
            let m = fresh.decode(&msg).unwrap();
            assert!(m.records.is_empty());
            assert_eq!(m.skipped_sets, 2);
            let mut known = Decoder::with_lanyard_templates(version, 7);
            assert_eq!(known.decode(&msg).unwrap().records, &recs[..2]);
        }
    }

    #[test]
    fn wire_layout() {
        let msg = build(Version::V9, &[v4(0)], true);
        // Header, template set 0 of 2 × (4 + 15 × 4) + 4, data set 256.
        assert_eq!(&msg[20..24], &[0, 0, 0, 132]);
        assert_eq!(&msg[24..28], &[1, 0, 0, 15]);
        assert_eq!(&msg[28..32], &[0, 1, 0, 8]);
        let d = 20 + 132;
        // 50-octet record + 4 header + 2 padding.
        assert_eq!(&msg[d..d + 4], &[1, 0, 0, 56]);
        assert_eq!(msg.len(), d + 56);
        assert_eq!(&msg[d + 4..d + 12], &(1u64 << 33).to_be_bytes());
        let msg = build(Version::Ipfix, &[v6(0)], true);
        assert_eq!(&msg[16..20], &[0, 2, 0, 132]);
        let d = 16 + 132;
        // 83-octet record + 4 + 1 padding.
        assert_eq!(&msg[d..d + 4], &[1, 1, 0, 88]);
        assert_eq!(msg.len(), d + 88);
    }

    #[test]
    fn fills_mtu_and_no_more() {
        for version in [Version::V9, Version::Ipfix] {
            for fam in [4, 6] {
                let mut buf = [0u8; DEFAULT_MTU];
                let mut b = MessageBuilder::new(version, &mut buf, &header(0)).unwrap();
                b.add_templates().unwrap();
                let mut n = 0;
                let r = if fam == 4 { v4(0) } else { v6(0) };
                while b.add_record(&r) {
                    n += 1;
                }
                assert_eq!(n, records_per_message(version, fam, DEFAULT_MTU, true));
                let len = b.finish();
                assert!(len <= DEFAULT_MTU && len.is_multiple_of(4));
                let m = Decoder::new().decode(&buf[..len]).unwrap();
                assert_eq!(m.records.len(), n);
            }
            // Alternating families: sets open and close, padding counted.
            let mut buf = [0u8; 600];
            let mut b = MessageBuilder::new(version, &mut buf, &header(0)).unwrap();
            let mut recs = Vec::new();
            for i in 0.. {
                let r = if i % 3 == 0 { v6(i) } else { v4(i) };
                if !b.add_record(&r) {
                    break;
                }
                recs.push(r);
            }
            let len = b.finish();
            assert!(len <= 600);
            let m = Decoder::with_lanyard_templates(version, 7)
                .decode(&buf[..len])
                .unwrap();
            assert_eq!(m.records, recs);
        }
    }

    #[test]
    fn small_buffers() {
        let mut tiny = [0u8; 10];
        assert_eq!(
            MessageBuilder::new(Version::V9, &mut tiny, &header(0)).unwrap_err(),
            Error::Truncated
        );
        let mut buf = [0u8; 100];
        let mut b = MessageBuilder::new(Version::Ipfix, &mut buf, &header(0)).unwrap();
        assert_eq!(b.add_templates(), Err(Error::Truncated));
        assert!(b.add_record(&v4(0)));
        assert!(!b.add_record(&v4(1)));
        assert!(!b.add_record(&v6(1)));
        assert_eq!(b.data_records(), 1);
        let len = b.finish();
        assert_eq!(len, 16 + 4 + 60);
    }

    #[test]
    fn truncated_and_garbage_are_errors() {
        for version in [Version::V9, Version::Ipfix] {
            let msg = build(version, &[v4(0), v6(1)], true);
            for cut in 0..msg.len() {
                let r = Decoder::new().decode(&msg[..cut]);
                // A cut at a set boundary is a valid shorter v9 message.
                if let Ok(m) = r {
                    assert_eq!(version, Version::V9);
                    assert!(m.records.len() < 2);
                }
            }
            // Set cut mid-way: error, not a panic.
            assert_eq!(
                Decoder::new().decode(&msg[..msg.len() - 8]).unwrap_err(),
                Error::Truncated
            );
        }
        assert!(Decoder::new().decode(&[]).is_err());
        assert!(Decoder::new().decode(&[0, 5, 0, 0]).is_err());
        // Set length below 4.
        let mut m = build(Version::V9, &[], true);
        m[22..24].copy_from_slice(&[0, 2]);
        assert_eq!(
            Decoder::new().decode(&m),
            Err(Error::Malformed("set length"))
        );
        // IPFIX length beyond the datagram.
        let mut m = build(Version::Ipfix, &[v4(0)], true);
        m[2] = 0xff;
        assert_eq!(Decoder::new().decode(&m), Err(Error::Truncated));
        // Template of zero-length fields would loop forever.
        let mut m = build(Version::V9, &[], false);
        m.extend_from_slice(&[0, 0, 0, 12, 1, 0, 0, 1, 0, 1, 0, 0]);
        m.extend_from_slice(&[1, 0, 0, 8, 0, 0, 0, 0]);
        assert!(Decoder::new().decode(&m).is_err());
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let seeds = [
            build(Version::V9, &[v4(0), v6(0)], true),
            build(Version::Ipfix, &[v4(0), v6(0)], true),
        ];
        let mut d = Decoder::new();
        for i in 0..200_000 {
            let mut m = seeds[i % 2].clone();
            // Flip a few bytes, sometimes cut.
            for _ in 0..1 + next() % 6 {
                let at = (next() as usize) % m.len();
                m[at] = next() as u8;
            }
            if next() % 4 == 0 {
                m.truncate((next() as usize) % (m.len() + 1));
            }
            let _ = d.decode(&m);
            let mut junk = vec![0u8; (next() % 64) as usize];
            junk.iter_mut().for_each(|b| *b = next() as u8);
            if junk.len() >= 2 {
                junk[0] = 0;
                junk[1] = if i % 2 == 0 { 9 } else { 10 };
            }
            let _ = d.decode(&junk);
        }
        assert!(d.template_count() <= MAX_TEMPLATES);
    }

    #[test]
    fn ipfix_variable_length_and_enterprise_fields() {
        // Template 300: enterprise element (4 octets) + variable-length
        // element + packetDeltaCount.
        let mut m = vec![0, 10, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        m.extend_from_slice(&[0, 2, 0, 24, 1, 44, 0, 3]);
        m.extend_from_slice(&[0x80, 1, 0, 4, 0, 0, 0x12, 0x34]);
        m.extend_from_slice(&[0, 82, 0xff, 0xff, 0, 2, 0, 8]);
        // Data: one record with a 3-octet string, one with a long form.
        let mut data = vec![1, 2, 3, 4, 3, b'a', b'b', b'c'];
        data.extend_from_slice(&5u64.to_be_bytes());
        data.extend_from_slice(&[1, 2, 3, 4, 255, 0, 2, b'x', b'y']);
        data.extend_from_slice(&6u64.to_be_bytes());
        m.extend_from_slice(&(300u16).to_be_bytes());
        m.extend_from_slice(&((data.len() + 4) as u16).to_be_bytes());
        m.extend_from_slice(&data);
        let len = m.len() as u16;
        m[2..4].copy_from_slice(&len.to_be_bytes());
        let r = Decoder::new().decode(&m).unwrap();
        assert_eq!(r.records.len(), 2);
        assert_eq!((r.records[0].packets, r.records[1].packets), (5, 6));
    }

    #[test]
    fn usage_records_carry_names_and_round_trip() {
        let mut buf = vec![0u8; 1400];
        let mut b = MessageBuilder::new(Version::Ipfix, &mut buf, &header(3)).unwrap();
        b.add_usage_templates().unwrap();
        let long = "é".repeat(40); // 80 octets: cut to 64 at a boundary
        let names = [
            UsageNames {
                application: "BitTorrent",
                service: "p2p",
                subscriber: "alice",
            },
            UsageNames {
                application: &long,
                service: "",
                subscriber: "bob",
            },
        ];
        assert!(b.add_usage_record(&v4(1), &names[0]));
        assert!(b.add_usage_record(&v6(2), &names[1]));
        assert!(b.add_usage_record(&v4(3), &names[0]));
        let n = b.finish();
        let m = Decoder::new().decode(&buf[..n]).unwrap();
        assert_eq!(m.templates, vec![TEMPLATE_USAGE_V4, TEMPLATE_USAGE_V6]);
        assert_eq!(m.records.len(), 3);
        // The usage template has no TOS, flags, VLAN: those read back 0.
        let strip = |mut r: ExportRecord| {
            r.tos = 0;
            r.tcp_flags = 0;
            r.vlan = 0;
            r
        };
        assert_eq!(m.records, vec![strip(v4(1)), strip(v6(2)), strip(v4(3))]);
        let of = |i: usize, id: u16| {
            m.names
                .iter()
                .find(|(r, e, _)| *r == i && *e == id)
                .map(|(_, _, v)| v.as_str())
        };
        assert_eq!(of(0, ie::APPLICATION_NAME), Some("BitTorrent"));
        assert_eq!(of(0, ie::APPLICATION_CATEGORY_NAME), Some("p2p"));
        assert_eq!(of(0, ie::USER_NAME), Some("alice"));
        assert_eq!(of(1, ie::APPLICATION_NAME), Some("é".repeat(32).as_str()));
        assert_eq!(of(1, ie::APPLICATION_CATEGORY_NAME), Some(""));
        assert_eq!(of(2, ie::USER_NAME), Some("alice"));
        // A data-only message decodes with the known templates.
        let mut buf2 = vec![0u8; 1400];
        let mut b = MessageBuilder::new(Version::Ipfix, &mut buf2, &header(6)).unwrap();
        assert!(b.add_usage_record(&v4(9), &names[0]));
        let n = b.finish();
        let m = Decoder::with_lanyard_templates(Version::Ipfix, 7)
            .decode(&buf2[..n])
            .unwrap();
        assert_eq!(m.records, vec![strip(v4(9))]);
        assert_eq!(m.names.len(), 3);
    }

    #[test]
    fn usage_records_fill_a_message_exactly_and_need_ipfix() {
        let mut buf = vec![0u8; 300];
        let mut b = MessageBuilder::new(Version::Ipfix, &mut buf, &header(0)).unwrap();
        let names = UsageNames {
            application: "HTTP",
            service: "web",
            subscriber: "s1",
        };
        let mut k = 0;
        while b.add_usage_record(&v4(k), &names) {
            k += 1;
        }
        assert!(k >= 3, "{k}");
        let n = b.finish();
        assert!(n <= 300 && n.is_multiple_of(4), "{n}");
        let m = Decoder::with_lanyard_templates(Version::Ipfix, 7)
            .decode(&buf[..n])
            .unwrap();
        assert_eq!(m.records.len(), k as usize);
        let mut buf = vec![0u8; 300];
        let mut b = MessageBuilder::new(Version::V9, &mut buf, &header(0)).unwrap();
        assert!(matches!(
            b.add_usage_templates(),
            Err(Error::Unsupported(_))
        ));
        assert!(!b.add_usage_record(&v4(0), &names));
    }
}
