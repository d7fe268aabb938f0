//! The MPLS stage: one labelled frame in, one decision out, the frame
//! rewritten in place (labels swapped, pushed or popped in the buffer's
//! headroom, see [`wire::mpls`]).
//!
//! * [`process_labelled`]: a frame that arrived with EtherType 0x8847.
//!   Reserved labels first (0/2 explicit null: pop, then the next label or
//!   the IP payload; 1 router alert: punt; the rest: drop), then the LFIB
//!   ([`tables::mpls::Lfib`]): swap / PHP / swap-and-push toward a next
//!   hop (ECMP by a hash of the stack and the IP addresses under it, the
//!   backup path when the primary's protection id is down), pop and route
//!   in an IP table, or pop to a pseudowire (RFC 4448 decapsulation).
//! * [`push_ftn`]: an IP packet the IP stage routed to a labelled next
//!   hop (FTN): push the stack.
//! * [`encap_pseudowire`]: a frame from an attachment circuit: encapsulate
//!   it whole for its pseudowire.
//!
//! TTL (RFC 3443): [`TtlMode::Uniform`] copies the IP TTL into pushed
//! labels and the label TTL back into the IP header on pop (the lower of
//! the two); [`TtlMode::Pipe`] pushes 255 and leaves the IP TTL alone
//! ("short pipe": the egress routes on the IP TTL). A label with TTL 0 or
//! 1 that would be forwarded is punted as expired; the worker answers
//! with ICMP time exceeded carrying the stack (RFC 4950,
//! [`build_ttl_exceeded`]), back to the previous LSR or down the LSP
//! ([`build_ttl_exceeded_lsp`], RFC 3032 §2.3.2; [`IcmpTunneling`]).
//! Pseudowire labels are not TTL-checked at the PE.
//!
//! TC: the frame's QoS class comes from its top label's TC on ingress
//! ([`MplsConfig::class_of_tc`]); pushed labels take the TC of the class
//! ([`MplsConfig::tc_of_class`]); on a swap the TC is kept unless
//! [`MplsConfig::remark`] rewrites it from the class.
//!
//! Pure functions: no locks, no allocation, no system calls.

use tables::mpls::{IlmAction, LabelCounters, Lfib, PopAf, Resolved};
use tables::NextHopTable;
use wire::mpls::{self as lbl, reserved, Lse, Span, Stack, LSE_LEN};

/// How TTLs cross between IP and MPLS (RFC 3443).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum TtlMode {
    /// IP TTL ↔ label TTL (traceroute sees every LSR).
    #[default]
    Uniform,
    /// Labels start at 255; the IP TTL is untouched inside the LSP.
    Pipe,
}

/// Where the ICMP time exceeded for an expired label TTL goes
/// (RFC 3032 §2.3.2).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub enum IcmpTunneling {
    /// Down the LSP when the expired label has labels below it (a VPN or
    /// other service label: the source lives in a table this LSR cannot
    /// see, even if an address like it is routed here) or the source
    /// has no route in the default FIB; else back to the previous LSR.
    #[default]
    Auto,
    /// Always down the LSP (the egress routes it back).
    Always,
    /// Always back out of the ingress port to the previous LSR.
    Never,
}

/// Per-switch MPLS settings.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct MplsConfig {
    pub ttl: TtlMode,
    /// ICMP for expired label TTLs: back, or down the LSP.
    pub icmp_tunneling: IcmpTunneling,
    /// QoS class (0..=7) → TC written on pushed labels.
    pub tc_of_class: [u8; 8],
    /// TC of the received top label → QoS class.
    pub class_of_tc: [u8; 8],
    /// Rewrite the TC of swapped labels from the class.
    pub remark: bool,
}

impl Default for MplsConfig {
    /// Uniform TTL; ICMP tunnelling auto; class n ↔ TC n; swaps keep
    /// their TC.
    fn default() -> Self {
        MplsConfig {
            ttl: TtlMode::Uniform,
            icmp_tunneling: IcmpTunneling::Auto,
            tc_of_class: [0, 1, 2, 3, 4, 5, 6, 7],
            class_of_tc: [0, 1, 2, 3, 4, 5, 6, 7],
            remark: false,
        }
    }
}

/// Why a labelled frame was dropped.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MplsDrop {
    /// Stack cut short, too deep, implicit null on the wire, or a payload
    /// that does not fit the action (not IP after a pop to IP, no
    /// Ethernet frame in a pseudowire).
    Malformed,
    /// No LFIB entry for the label.
    UnknownLabel,
    /// The entry's NHLFE / pseudowire / next hop is missing, or its
    /// primary is down with no backup.
    NoPath,
    /// A reserved label Lanyard does not act on (ELI, GAL, OAM alert,
    /// extension, unassigned 4–15).
    ReservedLabel,
    /// Pseudowire control word expected but absent or malformed.
    ControlWord,
    /// No headroom (or tail room) left to push the stack.
    NoRoom,
}

impl MplsDrop {
    pub fn name(self) -> &'static str {
        match self {
            MplsDrop::Malformed => "mpls-malformed",
            MplsDrop::UnknownLabel => "mpls-unknown-label",
            MplsDrop::NoPath => "mpls-no-path",
            MplsDrop::ReservedLabel => "mpls-reserved-label",
            MplsDrop::ControlWord => "mpls-control-word",
            MplsDrop::NoRoom => "mpls-no-room",
        }
    }
}

/// Why a labelled frame goes to the control plane.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MplsPunt {
    /// Label TTL 0 or 1 on a label to forward or route.
    TtlExpired,
    /// Router-alert label (1) on top.
    RouterAlert,
}

/// What to do with the frame.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MplsVerdict {
    /// Send toward `next_hop_id` (the egress writes the next hop's MAC
    /// from the neighbour table): the frame at `span` carries its new
    /// stack.
    Forward {
        span: Span,
        next_hop_id: u32,
        port: u16,
        class: u8,
        on_backup: bool,
    },
    /// Labels popped: route the IP packet at `span` (EtherType rewritten)
    /// in IP table `table`.
    Route {
        span: Span,
        table: u16,
        ipv6: bool,
        class: u8,
    },
    /// Deliver the customer frame `inner` to pseudowire `pw`'s attachment
    /// circuit `ac`.
    Pseudowire {
        inner: Span,
        pw: u32,
        ac: u32,
        class: u8,
    },
    Punt(MplsPunt),
    Drop(MplsDrop),
}

/// The tables the stage reads.
pub struct MplsTables<'a> {
    pub lfib: &'a Lfib,
    pub next_hops: &'a NextHopTable,
    pub counters: &'a LabelCounters,
    pub cfg: &'a MplsConfig,
}

#[inline]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// ECMP hash of a labelled frame: every label of the stack and, when the
/// payload looks like IP (RFC 4928 first-nibble heuristic), its
/// addresses. The same flow always hashes the same.
#[inline]
fn stack_hash(st: &Stack<&[u8]>) -> u32 {
    let mut h = 0x5851_f42d_4c95_7f2d_u64;
    for e in st.iter() {
        h = mix(h ^ e.label as u64);
    }
    let p = st.payload();
    match lbl::guess_payload(p) {
        lbl::PayloadGuess::Ipv4 if p.len() >= 20 => {
            h = mix(h ^ u64::from_be_bytes([
                p[12], p[13], p[14], p[15], p[16], p[17], p[18], p[19],
            ]))
        }
        lbl::PayloadGuess::Ipv6 if p.len() >= 40 => {
            for c in p[8..40].chunks_exact(8) {
                h = mix(h ^ u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]));
            }
        }
        _ => {}
    }
    (h >> 32) as u32
}

/// Sets an IPv4 TTL / IPv6 hop limit to `min(current, ttl)` (uniform
/// model on pop); IPv4 checksum updated incrementally. `false` if the
/// payload is not the family said.
#[inline]
fn lower_ip_ttl(ip: &mut [u8], ipv6: bool, ttl: u8) -> bool {
    if ipv6 {
        if ip.len() < 40 || ip[0] >> 4 != 6 {
            return false;
        }
        ip[7] = ip[7].min(ttl);
    } else {
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return false;
        }
        if ip[8] > ttl {
            let old = u16::from_be_bytes([ip[8], ip[9]]);
            ip[8] = ttl;
            let new = u16::from_be_bytes([ip[8], ip[9]]);
            let c = u16::from_be_bytes([ip[10], ip[11]]);
            let c = wire::checksum::update(c, old, new);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
        }
    }
    true
}

/// What popping one label left.
enum Popped {
    /// The bottom label went: IP at this span, EtherType rewritten.
    Routed(Span),
    /// More labels below: process the new top at this span.
    Continue(Span),
    Drop(MplsDrop),
}

/// Pops the top label at this LSR. Bottom of stack: the payload must be
/// IP of the family given, whose TTL becomes `min(ip, label)` in uniform
/// mode (the IP stage then decrements it for this hop). Not bottom: in
/// uniform mode the exposed label's TTL becomes `min(its, top)`.
fn pop_local(
    t: &MplsTables<'_>,
    buf: &mut [u8],
    f: Span,
    hdr: usize,
    top: Lse,
    ipv6: bool,
) -> Popped {
    let uniform = t.cfg.ttl == TtlMode::Uniform;
    let Ok(fr) = f.of_mut(buf) else {
        return Popped::Drop(MplsDrop::Malformed);
    };
    let Some(below) = fr.get_mut(hdr + LSE_LEN..) else {
        return Popped::Drop(MplsDrop::Malformed);
    };
    if top.bos {
        if uniform {
            if !lower_ip_ttl(below, ipv6, top.ttl) {
                return Popped::Drop(MplsDrop::Malformed);
            }
        } else if below.first().map(|b| b >> 4) != Some(if ipv6 { 6 } else { 4 }) {
            return Popped::Drop(MplsDrop::Malformed);
        }
        let et = if ipv6 { 0x86dd } else { 0x0800 };
        return match lbl::pop(buf, f, hdr, 1, et) {
            Ok(g) => Popped::Routed(g),
            Err(_) => Popped::Drop(MplsDrop::Malformed),
        };
    }
    if uniform {
        if let Ok(mut e) = Lse::read(below) {
            e.ttl = e.ttl.min(top.ttl);
            let _ = e.write(below);
        }
    }
    match lbl::pop(buf, f, hdr, 1, 0) {
        Ok(g) => Popped::Continue(g),
        Err(_) => Popped::Drop(MplsDrop::Malformed),
    }
}

/// Processes one labelled frame: `buf[f]` is the frame, `hdr` the length
/// of its link-layer header up to and including the 0x8847 EtherType
/// (14, or 18 with a VLAN tag). `class_in`: a class the QoS stage already
/// assigned, else the top label's TC decides. Counts the frame against
/// its top label when the LFIB has an entry for it.
pub fn process_labelled(
    t: &MplsTables<'_>,
    buf: &mut [u8],
    f: Span,
    hdr: usize,
    class_in: Option<u8>,
) -> MplsVerdict {
    let mut f = f;
    // Each round pops one label; the stack walk bounds the depth anyway.
    for _ in 0..lbl::MAX_DEPTH {
        let Some(stack_bytes) = f.of(buf).ok().and_then(|fr| fr.get(hdr..)) else {
            return MplsVerdict::Drop(MplsDrop::Malformed);
        };
        let Ok(st) = Stack::new_checked(stack_bytes) else {
            return MplsVerdict::Drop(MplsDrop::Malformed);
        };
        let top = st.top();
        let class = class_in.unwrap_or(t.cfg.class_of_tc[top.tc as usize & 7]) & 7;

        let (popped, table) = if top.is_reserved() {
            match top.label {
                reserved::IPV4_EXPLICIT_NULL | reserved::IPV6_EXPLICIT_NULL => {
                    let ipv6 = top.label == reserved::IPV6_EXPLICIT_NULL;
                    (pop_local(t, buf, f, hdr, top, ipv6), 0)
                }
                reserved::ROUTER_ALERT => return MplsVerdict::Punt(MplsPunt::RouterAlert),
                reserved::IMPLICIT_NULL => return MplsVerdict::Drop(MplsDrop::Malformed),
                _ => return MplsVerdict::Drop(MplsDrop::ReservedLabel),
            }
        } else {
            let Some(action) = t.lfib.ilm(top.label) else {
                return MplsVerdict::Drop(MplsDrop::UnknownLabel);
            };
            t.counters.count(top.label, f.len);
            match action {
                IlmAction::Forward { target } => {
                    if top.ttl <= 1 {
                        return MplsVerdict::Punt(MplsPunt::TtlExpired);
                    }
                    let hash = stack_hash(&st);
                    let Some(r) = t.lfib.resolve(t.next_hops, target, hash) else {
                        return MplsVerdict::Drop(MplsDrop::NoPath);
                    };
                    let bottom_is_v6 = lbl::guess_payload(st.payload()) == lbl::PayloadGuess::Ipv6;
                    return forward(t, buf, f, hdr, top, bottom_is_v6, &r, class);
                }
                IlmAction::PopLookup { af, table } => {
                    let ipv6 = match af {
                        PopAf::Ipv4 => false,
                        PopAf::Ipv6 => true,
                        PopAf::Any => match lbl::guess_payload(st.payload()) {
                            lbl::PayloadGuess::Ipv4 => false,
                            lbl::PayloadGuess::Ipv6 => true,
                            _ if !top.bos => false,
                            _ => return MplsVerdict::Drop(MplsDrop::Malformed),
                        },
                    };
                    (pop_local(t, buf, f, hdr, top, ipv6), table)
                }
                IlmAction::PopToPseudowire { pw } => {
                    if !top.bos {
                        return MplsVerdict::Drop(MplsDrop::Malformed);
                    }
                    let Some(p) = t.lfib.pseudowire(pw) else {
                        return MplsVerdict::Drop(MplsDrop::NoPath);
                    };
                    let off = hdr + st.header_len();
                    return match lbl::eth_decap(buf, f, off, p.control_word) {
                        Ok(d) => MplsVerdict::Pseudowire {
                            inner: d.inner,
                            pw,
                            ac: p.ac,
                            class,
                        },
                        Err(wire::Error::Malformed(_)) => MplsVerdict::Drop(MplsDrop::ControlWord),
                        Err(_) => MplsVerdict::Drop(MplsDrop::Malformed),
                    };
                }
            }
        };
        match popped {
            Popped::Routed(span) => {
                let ipv6 = span
                    .of(buf)
                    .ok()
                    .and_then(|fr| fr.get(hdr))
                    .is_some_and(|b| b >> 4 == 6);
                return MplsVerdict::Route {
                    span,
                    table,
                    ipv6,
                    class,
                };
            }
            Popped::Continue(g) => f = g,
            Popped::Drop(d) => return MplsVerdict::Drop(d),
        }
    }
    MplsVerdict::Drop(MplsDrop::Malformed)
}

/// Swap (and push) or PHP toward a resolved next hop.
#[allow(clippy::too_many_arguments)]
fn forward(
    t: &MplsTables<'_>,
    buf: &mut [u8],
    f: Span,
    hdr: usize,
    top: Lse,
    bottom_is_v6: bool,
    r: &Resolved,
    class: u8,
) -> MplsVerdict {
    let uniform = t.cfg.ttl == TtlMode::Uniform;
    let new_ttl = top.ttl - 1; // top.ttl > 1 checked by the caller
    let tc = if t.cfg.remark {
        t.cfg.tc_of_class[class as usize] & 7
    } else {
        top.tc
    };
    let out = r.labels.as_slice();
    let done = |span| MplsVerdict::Forward {
        span,
        next_hop_id: r.next_hop_id,
        port: r.next_hop.port,
        class,
        on_backup: r.on_backup,
    };
    let Some((&inner, outer)) = out.split_last() else {
        // PHP: pop, hand the rest (labels or IP) to the next hop.
        let Ok(fr) = f.of_mut(buf) else {
            return MplsVerdict::Drop(MplsDrop::Malformed);
        };
        let Some(below) = fr.get_mut(hdr + LSE_LEN..) else {
            return MplsVerdict::Drop(MplsDrop::Malformed);
        };
        let et = if top.bos {
            if uniform {
                if !lower_ip_ttl(below, bottom_is_v6, new_ttl) {
                    return MplsVerdict::Drop(MplsDrop::Malformed);
                }
            } else if !matches!(below.first().map(|b| b >> 4), Some(4) | Some(6)) {
                return MplsVerdict::Drop(MplsDrop::Malformed);
            }
            if bottom_is_v6 {
                0x86dd
            } else {
                0x0800
            }
        } else {
            if uniform {
                if let Ok(mut e) = Lse::read(below) {
                    e.ttl = new_ttl;
                    let _ = e.write(below);
                }
            }
            0
        };
        return match lbl::pop(buf, f, hdr, 1, et) {
            Ok(g) => done(g),
            Err(_) => MplsVerdict::Drop(MplsDrop::Malformed),
        };
    };
    // Swap the top to the innermost outgoing label, push the others.
    let Ok(fr) = f.of_mut(buf) else {
        return MplsVerdict::Drop(MplsDrop::Malformed);
    };
    if lbl::swap(fr, hdr, inner, tc, new_ttl).is_err() {
        return MplsVerdict::Drop(MplsDrop::Malformed);
    }
    if outer.is_empty() {
        return done(f);
    }
    let mut lses = [Lse::default(); tables::mpls::MAX_PUSH];
    let push_ttl = if uniform { new_ttl } else { 255 };
    let push_tc = t.cfg.tc_of_class[class as usize] & 7;
    for (e, &l) in lses.iter_mut().zip(outer) {
        *e = Lse {
            label: l,
            tc: push_tc,
            bos: false,
            ttl: push_ttl,
        };
    }
    match lbl::push(buf, f, hdr, &lses[..outer.len()]) {
        Ok(g) => done(g),
        Err(_) => MplsVerdict::Drop(MplsDrop::NoRoom),
    }
}

/// The QoS class (0..=7) of a routed IP packet about to be labelled
/// (FTN): the 802.1p value the input policy set (`set-pcp`) if it set
/// one, else the class selector of its DSCP (the precedence, `dscp >> 3`:
/// the DSCP as the input policy left it, re-marking included). Not IP:
/// class 0.
pub fn class_of_ip(frame: &[u8], l3_off: usize, pcp: Option<u8>) -> u8 {
    if let Some(p) = pcp {
        return p & 7;
    }
    crate::qos::dscp(frame, l3_off).map_or(0, |d| (d >> 3) & 7)
}

/// The QoS class (0..=7) of a customer frame entering a pseudowire: the
/// 802.1p value the attachment port's input policy set (`set-pcp`) if it
/// set one, else the 802.1p priority of the frame's outer tag (a tagged
/// frame: VLAN-mode circuits always), else the class selector of an IP
/// packet's DSCP (after any `set-dscp`), else 0 — the customer's own
/// marking carried into the labels' TC, as for FTN.
pub fn class_of_customer_frame(frame: &[u8], pcp: Option<u8>) -> u8 {
    if let Some(p) = pcp {
        return p & 7;
    }
    match frame.get(12..15) {
        Some(&[0x81, 0x00, tci] | &[0x88, 0xa8, tci]) => tci >> 5,
        Some(&[0x08, 0x00, _] | &[0x86, 0xdd, _]) => class_of_ip(frame, 14, None),
        _ => 0,
    }
}

/// FTN: pushes the resolved labels on an IP packet the IP stage routed
/// (and already decremented the TTL of). `hdr`: link-layer header length
/// including the IP EtherType. TTL: the IP TTL (uniform) or 255 (pipe);
/// TC from `class`. An empty stack leaves the frame as it is.
pub fn push_ftn(
    cfg: &MplsConfig,
    buf: &mut [u8],
    f: Span,
    hdr: usize,
    r: &Resolved,
    class: u8,
) -> Result<Span, MplsDrop> {
    if r.labels.is_empty() {
        return Ok(f);
    }
    let ip_ttl = match f.of(buf).ok().and_then(|fr| fr.get(hdr..)) {
        Some(ip) if ip.len() >= 20 && ip[0] >> 4 == 4 => ip[8],
        Some(ip) if ip.len() >= 40 && ip[0] >> 4 == 6 => ip[7],
        _ => return Err(MplsDrop::Malformed),
    };
    let ttl = match cfg.ttl {
        TtlMode::Uniform => ip_ttl,
        TtlMode::Pipe => 255,
    };
    let tc = cfg.tc_of_class[class as usize & 7] & 7;
    let mut lses = [Lse::default(); tables::mpls::MAX_PUSH];
    for (e, &l) in lses.iter_mut().zip(r.labels.as_slice()) {
        *e = Lse {
            label: l,
            tc,
            bos: false,
            ttl,
        };
    }
    lbl::push(buf, f, hdr, &lses[..r.labels.len()]).map_err(|_| MplsDrop::NoRoom)
}

/// A pseudowire's way out for a flow: the pseudowire and its resolved
/// transport (next hop, transport labels).
pub fn resolve_pseudowire(
    t: &MplsTables<'_>,
    pw: u32,
    hash: u32,
) -> Option<(tables::mpls::Pseudowire, Resolved)> {
    let p = t.lfib.pseudowire(pw)?;
    let r = t.lfib.resolve(t.next_hops, p.transport, hash)?;
    Some((p, r))
}

/// Encapsulates the customer frame at `f` for pseudowire `p` over `r`
/// (RFC 4448): `outer` (next hop's MAC, our MAC, optional uplink tag),
/// transport labels, the pseudowire label, the control word if the
/// pseudowire uses one. Label TTL 255, TC from `class`.
pub fn encap_pseudowire(
    cfg: &MplsConfig,
    buf: &mut [u8],
    f: Span,
    outer: &lbl::OuterHeader,
    p: &tables::mpls::Pseudowire,
    r: &Resolved,
    class: u8,
) -> Result<Span, MplsDrop> {
    let tc = cfg.tc_of_class[class as usize & 7] & 7;
    let mut lses = [Lse::default(); tables::mpls::MAX_PUSH + 1];
    let transport = r.labels.as_slice();
    let n = transport.len() + 1;
    for (e, &l) in lses
        .iter_mut()
        .zip(transport.iter().chain(std::iter::once(&p.remote_label)))
    {
        *e = Lse {
            label: l,
            tc,
            bos: false,
            ttl: 255,
        };
    }
    let cw = p.control_word.then_some(lbl::ControlWord::default());
    lbl::eth_encap(buf, f, outer, &lses[..n], cw).map_err(|_| MplsDrop::NoRoom)
}

/// Bytes of the original datagram quoted before ICMP extensions
/// (RFC 4884: zero-padded to this length when shorter).
const ICMP_EXT_QUOTE: usize = 128;

/// Write into `out` an ICMP time exceeded (Ethernet + IP + ICMP) for the
/// labelled `frame` (Ethernet, MPLS EtherType, stack, IP payload) whose
/// label TTL expired on `iface`: addressed to the source of the IP packet
/// under the stack, sent back to the frame's sender (the previous LSR,
/// which routes it on), quoting 128 bytes of that packet and carrying the
/// label stack as received in an ICMP extension object (RFC 4950 on
/// RFC 4884; what `traceroute -e` shows as `MPLS Label … TTL=1`). Returns
/// its length, 0 when no answer is due: not IP below the stack, a source
/// that may not be answered (unspecified, multicast, broadcast), a later
/// fragment, an ICMP error, or no address of that family on `iface`.
pub fn build_ttl_exceeded(
    frame: &[u8],
    iface: &crate::l3::RouterInterface,
    out: &mut [u8],
) -> usize {
    ttl_exceeded(frame, iface, out, false)
}

/// The same answer to be sent **down the LSP** (RFC 3032 §2.3.2): the
/// ICMP message under the label stack as received, every label's TTL
/// reset to 255 (the message's own IP TTL, 64, bounds its life once the
/// egress pops it), EtherType 0x8847, MACs to be rewritten. Running it
/// through [`process_labelled`] forwards it exactly as the expired frame
/// would have been (swap, PHP, explicit null below); the egress LSR
/// routes it back to the source — in the VRF, for a VPN label. Same
/// refusals as [`build_ttl_exceeded`].
pub fn build_ttl_exceeded_lsp(
    frame: &[u8],
    iface: &crate::l3::RouterInterface,
    out: &mut [u8],
) -> usize {
    ttl_exceeded(frame, iface, out, true)
}

/// Whether the answer to the expired `frame` goes down the LSP
/// ([`build_ttl_exceeded_lsp`]) rather than back to the previous LSR,
/// under `mode` (see [`IcmpTunneling::Auto`]): `routed` says whether an
/// IPv4 / IPv6 source address has a route in the default FIB. The
/// expired label is the first that is not explicit null (those are
/// popped before it). False for what gets no answer anyway.
pub fn ttl_exceeded_down_lsp(
    mode: IcmpTunneling,
    frame: &[u8],
    routed: impl FnOnce(std::net::IpAddr) -> bool,
) -> bool {
    use wire::mpls::{guess_payload, PayloadGuess};
    match mode {
        IcmpTunneling::Always => return true,
        IcmpTunneling::Never => return false,
        IcmpTunneling::Auto => {}
    }
    let Some(Ok(stack)) = frame.get(14..).map(Stack::new_checked) else {
        return false;
    };
    let expired = stack.iter().find(|e| {
        !matches!(
            e.label,
            reserved::IPV4_EXPLICIT_NULL | reserved::IPV6_EXPLICIT_NULL
        )
    });
    if expired.is_some_and(|e| !e.bos) {
        return true;
    }
    let p = stack.payload();
    let src: std::net::IpAddr = match guess_payload(p) {
        PayloadGuess::Ipv4 if p.len() >= 20 => [p[12], p[13], p[14], p[15]].into(),
        PayloadGuess::Ipv6 if p.len() >= 40 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&p[8..24]);
            a.into()
        }
        _ => return false,
    };
    !routed(src)
}

fn ttl_exceeded(
    frame: &[u8],
    iface: &crate::l3::RouterInterface,
    out: &mut [u8],
    lsp: bool,
) -> usize {
    use wire::checksum::{combine, finish, sum};
    use wire::mpls::{guess_payload, PayloadGuess};
    const ETH_LEN: usize = 14;
    const ETHERTYPE_MPLS: u16 = 0x8847;
    if frame.len() < ETH_LEN || u16::from_be_bytes([frame[12], frame[13]]) != ETHERTYPE_MPLS {
        return 0;
    }
    let Ok(stack) = Stack::new_checked(&frame[ETH_LEN..]) else {
        return 0;
    };
    let labels = &frame[ETH_LEN..ETH_LEN + stack.header_len()];
    let inner = stack.payload();
    let v6 = match guess_payload(inner) {
        PayloadGuess::Ipv4 => false,
        PayloadGuess::Ipv6 => true,
        _ => return 0,
    };
    // Fixed parts: Ethernet, IP, ICMP header, the padded quote, the
    // extension header, the object header, the stack.
    let ip_len = if v6 { 40 } else { 20 };
    let icmp_len = 8 + ICMP_EXT_QUOTE + 4 + 4 + labels.len();
    // Down the LSP: the stack again, in front of the IP header.
    let l2 = ETH_LEN + if lsp { labels.len() } else { 0 };
    let total = l2 + ip_len + icmp_len;
    if out.len() < total {
        return 0;
    }
    let (src, dst): ([u8; 16], [u8; 16]);
    let quote_len;
    if v6 {
        let Ok(p) = wire::Ipv6Packet::new_checked(inner) else {
            return 0;
        };
        let s = p.src_addr();
        if s.is_unspecified() || s.is_multicast() || p.next_header() == wire::IpProtocol::Icmpv6 {
            // An ICMPv6 message could be an error: never answer one with
            // another (RFC 4443 2.4 e); informational ones lose little.
            return 0;
        }
        // A global address of the interface, else its link-local one.
        let Some(&(me, _)) = iface
            .v6
            .iter()
            .find(|(a, _)| (a >> 118) != 0x3fa)
            .or_else(|| iface.v6.first())
        else {
            return 0;
        };
        src = me.to_be_bytes();
        dst = s.octets();
        quote_len = inner.len().min(40 + p.payload_len() as usize);
    } else {
        let Ok(p) = wire::Ipv4Packet::new_checked(inner) else {
            return 0;
        };
        let s = p.src_addr();
        if s.is_unspecified() || s.is_multicast() || s.is_broadcast() || p.frag_offset() != 0 {
            return 0;
        }
        let hl = p.header_len();
        if p.protocol() == wire::IpProtocol::Icmp
            && inner.len() > hl
            && matches!(inner[hl], 3 | 4 | 5 | 11 | 12)
        {
            return 0;
        }
        let Some(&(me, _)) = iface.v4.first() else {
            return 0;
        };
        let mut a = [0u8; 16];
        a[..4].copy_from_slice(&me.to_be_bytes());
        src = a;
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(&s.octets());
        dst = b;
        quote_len = inner.len().min(p.total_len() as usize);
    }
    let o = &mut out[..total];
    o.fill(0);
    o[0..6].copy_from_slice(&frame[6..12]);
    o[6..12].copy_from_slice(&iface.mac);
    if lsp {
        o[12..14].copy_from_slice(&ETHERTYPE_MPLS.to_be_bytes());
        o[ETH_LEN..l2].copy_from_slice(labels);
        for ttl in o[ETH_LEN + 3..l2].iter_mut().step_by(LSE_LEN) {
            *ttl = 255;
        }
    }
    let icmp_at = l2 + ip_len;
    if v6 {
        if !lsp {
            o[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        }
        let ip = &mut o[l2..icmp_at];
        ip[0] = 0x60;
        ip[4..6].copy_from_slice(&(icmp_len as u16).to_be_bytes());
        ip[6] = 58;
        ip[7] = 64;
        ip[8..24].copy_from_slice(&src);
        ip[24..40].copy_from_slice(&dst);
    } else {
        if !lsp {
            o[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        }
        let ip = &mut o[l2..icmp_at];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&((20 + icmp_len) as u16).to_be_bytes());
        ip[8] = 64;
        ip[9] = 1;
        ip[12..16].copy_from_slice(&src[..4]);
        ip[16..20].copy_from_slice(&dst[..4]);
        let c = finish(sum(ip));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }
    let icmp = &mut o[icmp_at..];
    if v6 {
        icmp[0] = 3; // time exceeded, code 0: hop limit in transit
        icmp[4] = (ICMP_EXT_QUOTE / 8) as u8; // RFC 4884: 64-bit words
    } else {
        icmp[0] = 11;
        icmp[5] = (ICMP_EXT_QUOTE / 4) as u8; // RFC 4884: 32-bit words
    }
    let q = quote_len.min(ICMP_EXT_QUOTE);
    icmp[8..8 + q].copy_from_slice(&inner[..q]);
    // Extension structure: version 2, then the MPLS label stack object
    // (class 1, c-type 1: the incoming stack).
    let ext = &mut icmp[8 + ICMP_EXT_QUOTE..];
    ext[0] = 0x20;
    ext[4..6].copy_from_slice(&((4 + labels.len()) as u16).to_be_bytes());
    ext[6] = 1;
    ext[7] = 1;
    ext[8..8 + labels.len()].copy_from_slice(labels);
    let c = finish(sum(ext));
    ext[2..4].copy_from_slice(&c.to_be_bytes());
    let mut acc = sum(icmp);
    if v6 {
        // Pseudo-header: addresses, upper-layer length, next header.
        acc = combine(acc, sum(&src));
        acc = combine(acc, sum(&dst));
        acc = combine(acc, icmp_len as u32);
        acc = combine(acc, 58);
    }
    let c = finish(acc);
    icmp[2..4].copy_from_slice(&c.to_be_bytes());
    total
}
