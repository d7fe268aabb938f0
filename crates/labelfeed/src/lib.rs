//! What FRR tells Lanyard about labels, decoded.
//!
//! With the zebra module `zebra-mpls/zebra_lanyard.so` loaded beside
//! `dplane_fpm_nl`, zebra's label state reaches Lanyard two ways:
//!
//! * **FPM** (netlink messages inside FPM frames): label entries as
//!   `RTM_NEWROUTE`/`RTM_DELROUTE` with `rtm_family = AF_MPLS`
//!   ([`LabelEntry`]: in-label, paths with `RTA_VIA`/`RTA_OIF`, out-labels
//!   in `RTA_NEWDST`, `RTA_MULTIPATH` for ECMP; no `RTA_NEWDST` means pop),
//!   and IPv4/IPv6 routes whose next hops carry an MPLS encap
//!   ([`LabelledRoute`]: `RTA_ENCAP_TYPE = LWTUNNEL_ENCAP_MPLS`,
//!   `RTA_ENCAP { MPLS_IPTUNNEL_DST }`). [`decode_route`] reads one
//!   netlink message; [`fpm_frames`] splits an FPM byte stream into frames
//!   and [`netlink_messages`] a frame into messages (an update is a delete
//!   and an add in one frame).
//! * **The pseudowire side channel** (a unix SOCK_SEQPACKET socket, one
//!   text line per operation, answered "ok" or "err <reason>"):
//!   [`PwMessage::parse`].
//!
//! Pure decoding: no sockets, no allocation beyond the decoded values,
//! every malformed input is an [`Error`], never a panic (fuzzed:
//! `fuzz/fuzz_targets/fuzz_labelfeed.rs`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why bytes or a line could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Error {
    /// Shorter than a header or a length field says.
    Truncated(&'static str),
    /// A field has a value the format does not allow.
    Malformed(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated(what) => write!(f, "truncated {what}"),
            Error::Malformed(what) => write!(f, "malformed: {what}"),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

fn bad<T>(s: impl Into<String>) -> Result<T> {
    Err(Error::Malformed(s.into()))
}

// Netlink / rtnetlink numbers (linux/rtnetlink.h, linux/lwtunnel.h).
const RTM_NEWROUTE: u16 = 24;
const RTM_DELROUTE: u16 = 25;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
const AF_MPLS: u8 = 28;
const RTA_DST: u16 = 1;
const RTA_OIF: u16 = 4;
const RTA_GATEWAY: u16 = 5;
const RTA_MULTIPATH: u16 = 9;
const RTA_TABLE: u16 = 15;
const RTA_VIA: u16 = 18;
const RTA_NEWDST: u16 = 19;
const RTA_ENCAP_TYPE: u16 = 21;
const RTA_ENCAP: u16 = 22;
const LWTUNNEL_ENCAP_MPLS: u16 = 1;
const MPLS_IPTUNNEL_DST: u16 = 1;
const NLA_TYPE_MASK: u16 = 0x3fff;
const NLMSG_HDR: usize = 16;
const RTMSG_LEN: usize = 12;

/// Most paths one message may carry (FRR's multipath limit is 256).
pub const MAX_PATHS: usize = 256;
/// Most labels one path may carry (FRR's MPLS_MAX_LABELS is 16).
pub const MAX_LABELS: usize = 16;

/// One way out of a label entry or labelled route.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LabelPath {
    /// Next-hop address (`RTA_VIA` / `RTA_GATEWAY`), none if connected.
    pub via: Option<IpAddr>,
    /// Outgoing interface index (in zebra's namespace).
    pub oif: Option<u32>,
    /// Labels to push, outermost first; empty = pop (implicit null).
    pub labels: Vec<u32>,
}

/// An MPLS label entry (zebra LSP): what to do with `in_label`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelEntry {
    pub in_label: u32,
    /// `rtm_protocol` (e.g. 193 = LDP, 186 = BGP, 196 = static? see FRR
    /// `zebra2proto`); kept for `show` output.
    pub protocol: u8,
    pub paths: Vec<LabelPath>,
}

/// An IP route at least one of whose next hops pushes labels (FTN).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelledRoute {
    pub prefix: IpAddr,
    pub prefix_len: u8,
    /// Kernel table id (254 = main); with netns VRFs the module may rewrite
    /// it (docs/mpls.md).
    pub table: u32,
    pub protocol: u8,
    /// Every path, labelled or not (an ECMP route may mix both).
    pub paths: Vec<LabelPath>,
}

/// One decoded netlink route message that concerns labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelMsg {
    /// `RTM_NEWROUTE` AF_MPLS: install or replace.
    LabelAdd(LabelEntry),
    /// `RTM_DELROUTE` AF_MPLS.
    LabelDel { in_label: u32 },
    /// `RTM_NEWROUTE` AF_INET/6 with an MPLS encap on a next hop.
    RouteAdd(LabelledRoute),
    /// `RTM_DELROUTE` AF_INET/6 (labelled or not: the caller knows).
    RouteDel {
        prefix: IpAddr,
        prefix_len: u8,
        table: u32,
    },
}

fn u16_at(b: &[u8], o: usize) -> Result<u16> {
    b.get(o..o + 2)
        .map(|x| u16::from_ne_bytes([x[0], x[1]]))
        .ok_or(Error::Truncated("u16"))
}

fn u32_at(b: &[u8], o: usize) -> Result<u32> {
    b.get(o..o + 4)
        .map(|x| u32::from_ne_bytes([x[0], x[1], x[2], x[3]]))
        .ok_or(Error::Truncated("u32"))
}

/// Netlink attributes of `b`: (type, payload), 4-byte aligned.
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8])>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let r = (|| {
            let len = u16_at(self.0, 0)? as usize;
            let ty = u16_at(self.0, 2)? & NLA_TYPE_MASK;
            if len < 4 || len > self.0.len() {
                return bad(format!("attribute length {len}"));
            }
            let payload = &self.0[4..len];
            let next = ((len + 3) & !3).min(self.0.len());
            self.0 = &self.0[next..];
            Ok((ty, payload))
        })();
        if r.is_err() {
            self.0 = &[];
        }
        Some(r)
    }
}

/// A label stack as in `RTA_DST`/`RTA_NEWDST`/`MPLS_IPTUNNEL_DST`:
/// big-endian LSEs, bottom-of-stack bit on the last.
fn labels(b: &[u8]) -> Result<Vec<u32>> {
    if !b.len().is_multiple_of(4) || b.len() / 4 > MAX_LABELS {
        return bad(format!("label stack of {} bytes", b.len()));
    }
    let v: Vec<u32> = b
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]) >> 12)
        .collect();
    Ok(v)
}

fn addr(family: u8, b: &[u8]) -> Result<IpAddr> {
    match (family, b.len()) {
        (AF_INET, 4) => Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        (AF_INET6, 16) => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        _ => bad(format!("address family {family} with {} bytes", b.len())),
    }
}

/// A route's `RTA_GATEWAY`. An IPv4-mapped IPv6 gateway is the IPv4 core
/// neighbour of an IPv6 route whose BGP next hop is IPv4-mapped (VPNv6
/// over an IPv4 core): `zebra_lanyard_fpm.so` encodes it so, since stock
/// FRR leaves that gateway out (docs/vrf.md, "VPNv6").
fn gateway(family: u8, b: &[u8]) -> Result<IpAddr> {
    Ok(match addr(family, b)? {
        IpAddr::V6(a) => a.to_ipv4_mapped().map_or(IpAddr::V6(a), IpAddr::V4),
        a => a,
    })
}

/// `struct rtvia`: family (u16) then the address.
fn via(b: &[u8]) -> Result<IpAddr> {
    let fam = u16_at(b, 0)?;
    let fam = u8::try_from(fam).map_err(|_| Error::Malformed(format!("via family {fam}")))?;
    addr(fam, &b[2..])
}

fn encap_labels(b: &[u8]) -> Result<Vec<u32>> {
    for a in Attrs(b) {
        let (ty, p) = a?;
        if ty == MPLS_IPTUNNEL_DST {
            return labels(p);
        }
    }
    Ok(Vec::new())
}

/// Attributes that describe one path (top level or inside an rtnexthop).
fn path_attrs(family: u8, b: &[u8], p: &mut LabelPath) -> Result<()> {
    let mut encap_type = None;
    let mut encap = None;
    for a in Attrs(b) {
        let (ty, v) = a?;
        match ty {
            RTA_OIF => p.oif = Some(u32_at(v, 0)?),
            RTA_VIA => p.via = Some(via(v)?),
            RTA_GATEWAY => p.via = Some(gateway(family, v)?),
            RTA_NEWDST => p.labels = labels(v)?,
            RTA_ENCAP_TYPE => encap_type = Some(u16_at(v, 0)?),
            RTA_ENCAP => encap = Some(v),
            _ => {}
        }
    }
    if let (Some(LWTUNNEL_ENCAP_MPLS), Some(e)) = (encap_type, encap) {
        p.labels = encap_labels(e)?;
    }
    Ok(())
}

fn multipath(family: u8, mut b: &[u8], out: &mut Vec<LabelPath>) -> Result<()> {
    while !b.is_empty() {
        let len = u16_at(b, 0)? as usize;
        if len < 8 || len > b.len() {
            return bad(format!("rtnexthop length {len}"));
        }
        if out.len() == MAX_PATHS {
            return bad("more than 256 paths");
        }
        let ifindex = u32_at(b, 4)?;
        let mut p = LabelPath {
            oif: (ifindex != 0).then_some(ifindex),
            ..LabelPath::default()
        };
        path_attrs(family, &b[8..len], &mut p)?;
        out.push(p);
        b = &b[((len + 3) & !3).min(b.len())..];
    }
    Ok(())
}

/// Decodes one netlink message (header included). `Ok(None)`: a message
/// that is not about labels (another type, or an IP route without any
/// MPLS encap) — the ordinary FIB reader handles it.
pub fn decode_route(msg: &[u8]) -> Result<Option<LabelMsg>> {
    let len = u32_at(msg, 0)? as usize;
    if len < NLMSG_HDR + RTMSG_LEN || len > msg.len() {
        return Err(Error::Truncated("netlink message"));
    }
    let ty = u16_at(msg, 4)?;
    if ty != RTM_NEWROUTE && ty != RTM_DELROUTE {
        return Ok(None);
    }
    let rt = &msg[NLMSG_HDR..len];
    let family = rt[0];
    let dst_len = rt[1];
    let mut table = rt[4] as u32;
    let protocol = rt[5];
    let attrs = &rt[RTMSG_LEN..];
    let mut dst: Option<&[u8]> = None;
    let mut top = LabelPath::default();
    let mut paths = Vec::new();
    let mut mp = false;
    for a in Attrs(attrs) {
        let (t, v) = a?;
        match t {
            RTA_DST => dst = Some(v),
            RTA_TABLE => table = u32_at(v, 0)?,
            RTA_MULTIPATH => {
                multipath(family, v, &mut paths)?;
                mp = true;
            }
            _ => {}
        }
    }
    if !mp {
        path_attrs(family, attrs, &mut top)?;
        if top.via.is_some() || top.oif.is_some() || !top.labels.is_empty() {
            paths.push(top);
        }
    }
    match family {
        AF_MPLS => {
            let d = labels(dst.ok_or(Error::Truncated("RTA_DST of a label entry"))?)?;
            let [in_label] = d[..] else {
                return bad(format!("label entry keyed by {} labels", d.len()));
            };
            if ty == RTM_DELROUTE {
                return Ok(Some(LabelMsg::LabelDel { in_label }));
            }
            Ok(Some(LabelMsg::LabelAdd(LabelEntry {
                in_label,
                protocol,
                paths,
            })))
        }
        AF_INET | AF_INET6 => {
            let width = if family == AF_INET { 32 } else { 128 };
            if dst_len > width {
                return bad(format!("prefix length {dst_len}"));
            }
            let prefix = match dst {
                Some(d) => addr(family, d)?,
                None if family == AF_INET => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
                None => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
            };
            if ty == RTM_DELROUTE {
                return Ok(Some(LabelMsg::RouteDel {
                    prefix,
                    prefix_len: dst_len,
                    table,
                }));
            }
            if paths.iter().all(|p| p.labels.is_empty()) {
                return Ok(None);
            }
            Ok(Some(LabelMsg::RouteAdd(LabelledRoute {
                prefix,
                prefix_len: dst_len,
                table,
                protocol,
                paths,
            })))
        }
        _ => Ok(None),
    }
}

/// Splits an FPM byte stream (version 1, type 1 = netlink, 16-bit length
/// including the 4-byte header) into netlink messages. Returns the
/// messages found and how many bytes they used; the rest is an incomplete
/// frame to keep for the next read. A bad header is an error (the stream
/// cannot be resynchronised: close the connection).
pub fn fpm_frames(buf: &[u8]) -> Result<(Vec<&[u8]>, usize)> {
    let mut out = Vec::new();
    let mut off = 0;
    while buf.len() - off >= 4 {
        let h = &buf[off..off + 4];
        let len = u16::from_be_bytes([h[2], h[3]]) as usize;
        if h[0] != 1 || h[1] != 1 || len < 4 {
            return bad(format!(
                "FPM header version {} type {} length {len}",
                h[0], h[1]
            ));
        }
        if buf.len() - off < len {
            break;
        }
        out.push(&buf[off + 4..off + len]);
        off += len;
    }
    Ok((out, off))
}

/// Splits one FPM frame's payload into its netlink messages: zebra 8.4
/// puts a route update's `RTM_DELROUTE` and `RTM_NEWROUTE` in one frame.
/// A length that runs past the payload is an error.
pub fn netlink_messages(mut payload: &[u8]) -> Result<Vec<&[u8]>> {
    let mut out = Vec::new();
    while !payload.is_empty() {
        let len = u32_at(payload, 0)? as usize;
        if len < NLMSG_HDR || len > payload.len() {
            return bad(format!("netlink length {len}"));
        }
        out.push(&payload[..len]);
        payload = &payload[((len + 3) & !3).min(payload.len())..];
    }
    Ok(out)
}

// ---------------------------------------------------------------------------
// Pseudowire side channel.

/// Install or uninstall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PwOp {
    Install,
    Uninstall,
}

/// One next hop toward the pseudowire's peer, with its transport labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PwNextHop {
    /// Gateway, none if the peer is directly connected through `ifindex`.
    pub gateway: Option<IpAddr>,
    pub ifindex: u32,
    /// Transport labels, outermost first; implicit null (3) = none.
    pub labels: Vec<u32>,
}

/// A pseudowire operation from the zebra module (docs/mpls.md,
/// "Pseudowire side channel"). One line:
///
/// `v=1 op=pw-install ifname=mpw1 vrf=0 type=5 local=16 remote=17 cw=1
/// status=0 peer=10.255.0.2 pwid=100 lsr=10.255.0.2 vpn=CUST1
/// nh=10.0.12.2@3/18 backup=10.0.13.2@4/20/21`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PwMessage {
    pub op: PwOp,
    /// The pseudowire's name in ldpd's config (`member pseudowire IF`).
    pub ifname: String,
    pub vrf: u32,
    /// 4 = Ethernet tagged, 5 = Ethernet (RFC 4446).
    pub pw_type: u8,
    /// Label we expect from the peer (our ILM entry, pop to the AC).
    pub local_label: u32,
    /// Label the peer expects (bottom of our stack on encap).
    pub remote_label: u32,
    pub control_word: bool,
    pub peer: IpAddr,
    pub pw_id: u32,
    pub lsr_id: Option<Ipv4Addr>,
    /// The `l2vpn NAME` this pseudowire is a member of.
    pub vpn: Option<String>,
    pub next_hops: Vec<PwNextHop>,
    pub backup_next_hops: Vec<PwNextHop>,
}

fn num<T: std::str::FromStr>(k: &str, v: &str) -> Result<T> {
    v.parse()
        .map_err(|_| Error::Malformed(format!("{k}={v}: not a number")))
}

fn label(k: &str, v: &str) -> Result<u32> {
    let l: u32 = num(k, v)?;
    if l > 0xF_FFFF {
        return bad(format!("{k}={v}: label above 1048575"));
    }
    Ok(l)
}

fn next_hop(v: &str) -> Result<PwNextHop> {
    let mut parts = v.split('/');
    let head = parts.next().unwrap_or_default();
    let (gw, ifx) = head
        .split_once('@')
        .ok_or_else(|| Error::Malformed(format!("next hop {v}: no @ifindex")))?;
    let gateway = match gw {
        "-" => None,
        g => Some(
            g.parse::<IpAddr>()
                .map_err(|_| Error::Malformed(format!("next hop {v}: bad address")))?,
        ),
    };
    let ifindex = num("ifindex", ifx)?;
    let mut labels = Vec::new();
    for l in parts {
        if labels.len() == MAX_LABELS {
            return bad(format!("next hop {v}: more than 16 labels"));
        }
        let l = label("nh label", l)?;
        if l != 3 {
            labels.push(l);
        }
    }
    Ok(PwNextHop {
        gateway,
        ifindex,
        labels,
    })
}

impl PwMessage {
    /// Parses one line (a trailing newline is allowed). Unknown keys are
    /// ignored (later module versions may add some); missing required
    /// keys, a version other than 1, and bad values are errors.
    pub fn parse(line: &str) -> Result<PwMessage> {
        let line = line.strip_suffix('\n').unwrap_or(line);
        if line.len() > 4096 {
            return bad("line longer than 4096 bytes");
        }
        let mut version = None;
        let mut op = None;
        let mut ifname = None;
        let (mut vrf, mut pw_type, mut local, mut remote) = (0, None, None, None);
        let (mut cw, mut peer, mut pw_id, mut lsr, mut vpn) = (false, None, 0, None, None);
        let (mut nhs, mut backups) = (Vec::new(), Vec::new());
        for tok in line.split(' ').filter(|t| !t.is_empty()) {
            let (k, v) = tok
                .split_once('=')
                .ok_or_else(|| Error::Malformed(format!("token {tok:?} without '='")))?;
            match k {
                "v" => version = Some(v),
                "op" => {
                    op = Some(match v {
                        "pw-install" => PwOp::Install,
                        "pw-uninstall" => PwOp::Uninstall,
                        _ => return bad(format!("op={v}")),
                    })
                }
                "ifname" => {
                    if v.is_empty() || v.len() > 15 {
                        return bad(format!("ifname={v}"));
                    }
                    ifname = Some(v.to_string())
                }
                "vrf" => vrf = num(k, v)?,
                "type" => pw_type = Some(num::<u8>(k, v)?),
                "local" => local = Some(label(k, v)?),
                "remote" => remote = Some(label(k, v)?),
                "cw" => {
                    cw = match v {
                        "0" => false,
                        "1" => true,
                        _ => return bad(format!("cw={v}")),
                    }
                }
                "peer" => {
                    peer = Some(
                        v.parse::<IpAddr>()
                            .map_err(|_| Error::Malformed(format!("peer={v}")))?,
                    )
                }
                "pwid" => pw_id = num(k, v)?,
                "lsr" => {
                    lsr = Some(
                        v.parse::<Ipv4Addr>()
                            .map_err(|_| Error::Malformed(format!("lsr={v}")))?,
                    )
                }
                "vpn" => vpn = (v != "-").then(|| v.to_string()),
                "nh" | "backup" => {
                    let list = if k == "nh" { &mut nhs } else { &mut backups };
                    if list.len() == MAX_PATHS {
                        return bad("more than 256 next hops");
                    }
                    list.push(next_hop(v)?);
                }
                _ => {}
            }
        }
        if version != Some("1") {
            return bad(format!("version {version:?}, expected 1"));
        }
        let missing = |k: &'static str| Error::Malformed(format!("missing {k}="));
        Ok(PwMessage {
            op: op.ok_or_else(|| missing("op"))?,
            ifname: ifname.ok_or_else(|| missing("ifname"))?,
            vrf,
            pw_type: pw_type.ok_or_else(|| missing("type"))?,
            local_label: local.ok_or_else(|| missing("local"))?,
            remote_label: remote.ok_or_else(|| missing("remote"))?,
            control_word: cw,
            peer: peer.ok_or_else(|| missing("peer"))?,
            pw_id,
            lsr_id: lsr,
            vpn,
            next_hops: nhs,
            backup_next_hops: backups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(payload);
        while v.len() % 4 != 0 {
            v.push(0);
        }
        v
    }

    fn lse(labels: &[u32]) -> Vec<u8> {
        let mut v = Vec::new();
        for (i, l) in labels.iter().enumerate() {
            let bos = if i + 1 == labels.len() { 0x100 } else { 0 };
            v.extend_from_slice(&(l << 12 | bos).to_be_bytes());
        }
        v
    }

    fn msg(ty: u16, family: u8, dst_len: u8, attrs: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        let len = 16 + 12 + attrs.len();
        v.extend_from_slice(&(len as u32).to_ne_bytes());
        v.extend_from_slice(&ty.to_ne_bytes());
        v.extend_from_slice(&[0; 10]);
        v.extend_from_slice(&[family, dst_len, 0, 0, 254, 193, 0, 1, 0, 0, 0, 0]);
        v.extend_from_slice(attrs);
        v
    }

    #[test]
    fn lsp_swap_single_path() {
        let mut a = nla(RTA_DST, &lse(&[17]));
        let mut via_b = 2u16.to_ne_bytes().to_vec();
        via_b.extend_from_slice(&[10, 0, 12, 2]);
        a.extend(nla(RTA_VIA, &via_b));
        a.extend(nla(RTA_NEWDST, &lse(&[100])));
        a.extend(nla(RTA_OIF, &3u32.to_ne_bytes()));
        let m = decode_route(&msg(RTM_NEWROUTE, AF_MPLS, 20, &a)).unwrap();
        assert_eq!(
            m,
            Some(LabelMsg::LabelAdd(LabelEntry {
                in_label: 17,
                protocol: 193,
                paths: vec![LabelPath {
                    via: Some("10.0.12.2".parse().unwrap()),
                    oif: Some(3),
                    labels: vec![100],
                }],
            }))
        );
        let d = decode_route(&msg(RTM_DELROUTE, AF_MPLS, 20, &nla(RTA_DST, &lse(&[17])))).unwrap();
        assert_eq!(d, Some(LabelMsg::LabelDel { in_label: 17 }));
    }

    #[test]
    fn labelled_ecmp_route() {
        let mut mpath = Vec::new();
        for (ifx, gw, labels) in [
            (3u32, [10, 0, 12, 2], vec![16u32, 200]),
            (4, [10, 0, 13, 2], vec![]),
        ] {
            let mut inner = nla(RTA_GATEWAY, &gw);
            if !labels.is_empty() {
                inner.extend(nla(RTA_ENCAP_TYPE, &LWTUNNEL_ENCAP_MPLS.to_ne_bytes()));
                inner.extend(nla(RTA_ENCAP, &nla(MPLS_IPTUNNEL_DST, &lse(&labels))));
            }
            let mut rtnh = Vec::new();
            rtnh.extend_from_slice(&((8 + inner.len()) as u16).to_ne_bytes());
            rtnh.extend_from_slice(&[0, 0]);
            rtnh.extend_from_slice(&ifx.to_ne_bytes());
            rtnh.extend(inner);
            mpath.extend(rtnh);
        }
        let mut a = nla(RTA_DST, &[10, 255, 0, 2]);
        a.extend(nla(RTA_MULTIPATH, &mpath));
        let Some(LabelMsg::RouteAdd(r)) =
            decode_route(&msg(RTM_NEWROUTE, AF_INET, 32, &a)).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.prefix, "10.255.0.2".parse::<IpAddr>().unwrap());
        assert_eq!(r.paths.len(), 2);
        assert_eq!(r.paths[0].labels, [16, 200]);
        assert_eq!(r.paths[0].oif, Some(3));
        assert!(r.paths[1].labels.is_empty());
        // An unlabelled route is not ours.
        let plain = [
            nla(RTA_DST, &[10, 1, 0, 0]),
            nla(RTA_GATEWAY, &[10, 0, 12, 2]),
        ]
        .concat();
        assert_eq!(
            decode_route(&msg(RTM_NEWROUTE, AF_INET, 16, &plain)).unwrap(),
            None
        );
    }

    #[test]
    fn vpnv6_route_with_an_ipv4_mapped_gateway() {
        // What zebra_lanyard_fpm.so sends for a VPNv6 route over an IPv4
        // core: table 1001, gateway ::ffff:10.0.12.2, [16, 81].
        let mut gw = [0u8; 16];
        gw[10] = 0xff;
        gw[11] = 0xff;
        gw[12..].copy_from_slice(&[10, 0, 12, 2]);
        let mut a = nla(
            RTA_DST,
            &[0x20, 0x01, 0x0d, 0xb8, 0, 0xb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        a.extend(nla(RTA_TABLE, &1001u32.to_ne_bytes()));
        a.extend(nla(RTA_GATEWAY, &gw));
        a.extend(nla(RTA_OIF, &2u32.to_ne_bytes()));
        a.extend(nla(RTA_ENCAP_TYPE, &LWTUNNEL_ENCAP_MPLS.to_ne_bytes()));
        a.extend(nla(RTA_ENCAP, &nla(MPLS_IPTUNNEL_DST, &lse(&[16, 81]))));
        let Some(LabelMsg::RouteAdd(r)) =
            decode_route(&msg(RTM_NEWROUTE, AF_INET6, 48, &a)).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.prefix, "2001:db8:b::".parse::<IpAddr>().unwrap());
        assert_eq!(r.table, 1001);
        assert_eq!(
            r.paths,
            [LabelPath {
                via: Some("10.0.12.2".parse().unwrap()),
                oif: Some(2),
                labels: vec![16, 81],
            }]
        );
        // A real IPv6 gateway stays IPv6.
        let mut b = nla(
            RTA_DST,
            &[0x20, 0x01, 0x0d, 0xb8, 0, 0xb, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        );
        b.extend(nla(
            RTA_GATEWAY,
            &"fe80::1".parse::<Ipv6Addr>().unwrap().octets(),
        ));
        b.extend(nla(RTA_ENCAP_TYPE, &LWTUNNEL_ENCAP_MPLS.to_ne_bytes()));
        b.extend(nla(RTA_ENCAP, &nla(MPLS_IPTUNNEL_DST, &lse(&[81]))));
        let Some(LabelMsg::RouteAdd(r)) =
            decode_route(&msg(RTM_NEWROUTE, AF_INET6, 48, &b)).unwrap()
        else {
            panic!()
        };
        assert_eq!(r.paths[0].via, Some("fe80::1".parse().unwrap()));
    }

    #[test]
    fn malformed_messages_are_errors() {
        assert!(decode_route(&[]).is_err());
        let a = nla(RTA_DST, &lse(&[17, 18]));
        assert!(decode_route(&msg(RTM_NEWROUTE, AF_MPLS, 20, &a)).is_err());
        let mut m = msg(RTM_NEWROUTE, AF_MPLS, 20, &nla(RTA_DST, &lse(&[17])));
        m[28] = 200; // attribute length past the end
        assert!(decode_route(&m).is_err());
        let bad_len = msg(RTM_NEWROUTE, AF_INET, 33, &nla(RTA_DST, &[1, 2, 3, 4]));
        assert!(decode_route(&bad_len).is_err());
    }

    #[test]
    fn fpm_framing() {
        let m = msg(RTM_DELROUTE, AF_MPLS, 20, &nla(RTA_DST, &lse(&[17])));
        let mut s = vec![1, 1];
        s.extend_from_slice(&((m.len() + 4) as u16).to_be_bytes());
        s.extend_from_slice(&m);
        s.extend_from_slice(&[1, 1, 0]);
        let (frames, used) = fpm_frames(&s).unwrap();
        assert_eq!(frames, vec![&m[..]]);
        let two = [m.clone(), m.clone()].concat();
        assert_eq!(netlink_messages(&two).unwrap(), vec![&m[..], &m[..]]);
        assert!(netlink_messages(&m[..20]).is_err());
        assert_eq!(used, m.len() + 4);
        assert!(fpm_frames(&[2, 1, 0, 8]).is_err());
    }

    /// Random bytes and mutations of valid messages never panic (the
    /// stable twin of fuzz/fuzz_targets/fuzz_labelfeed.rs).
    #[test]
    fn random_input_never_panics() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seed = nla(RTA_DST, &lse(&[17]));
        seed.extend(nla(RTA_NEWDST, &lse(&[100, 200])));
        seed.extend(nla(
            RTA_MULTIPATH,
            &[16, 0, 0, 0, 3, 0, 0, 0, 8, 0, 5, 0, 10, 0, 12, 2],
        ));
        let base = msg(RTM_NEWROUTE, AF_MPLS, 20, &seed);
        let line = b"v=1 op=pw-install ifname=mpw1 type=5 local=16 remote=17 cw=1 peer=10.255.0.2 nh=10.0.12.2@3/18";
        for i in 0..200_000 {
            let mut m = if i % 2 == 0 {
                base.clone()
            } else {
                line.to_vec()
            };
            for _ in 0..1 + next() % 4 {
                let at = next() as usize % m.len();
                m[at] = next() as u8;
            }
            m.truncate(next() as usize % (m.len() + 1));
            let _ = decode_route(&m);
            let _ = netlink_messages(&m);
            let _ = fpm_frames(&m);
            if let Ok(s) = std::str::from_utf8(&m) {
                let _ = PwMessage::parse(s);
            }
        }
    }

    #[test]
    fn pw_line() {
        let l = "v=1 op=pw-install ifname=mpw1 vrf=0 type=5 local=16 remote=17 cw=1 status=0 \
                 peer=10.255.0.2 pwid=100 lsr=10.255.0.2 vpn=CUST1 nh=10.0.12.2@3/3 \
                 backup=10.0.13.2@4/20/21 future=x\n";
        let m = PwMessage::parse(l).unwrap();
        assert_eq!(m.op, PwOp::Install);
        assert_eq!((m.local_label, m.remote_label, m.pw_type), (16, 17, 5));
        assert!(m.control_word);
        assert_eq!(m.vpn.as_deref(), Some("CUST1"));
        assert_eq!(
            m.next_hops[0].labels,
            Vec::<u32>::new(),
            "implicit null dropped"
        );
        assert_eq!(m.backup_next_hops[0].labels, [20, 21]);
        for bad in [
            "v=2 op=pw-install ifname=a type=5 local=16 remote=17 peer=1.2.3.4",
            "v=1 op=pw-install ifname=a type=5 local=16 remote=2000000 peer=1.2.3.4",
            "v=1 op=pw-install ifname=a type=5 local=16 peer=1.2.3.4",
            "v=1 op=frob ifname=a type=5 local=16 remote=17 peer=1.2.3.4",
            "v=1 op=pw-install ifname=a type=5 local=16 remote=17 peer=1.2.3.4 nh=1.2.3.4",
            "v=1 junk",
        ] {
            assert!(PwMessage::parse(bad).is_err(), "{bad}");
        }
    }
}
