//! Test-frame signature and frame building.
//!
//! Every test frame carries an 18-byte signature: magic `0x4C59` ("LY"),
//! trial nonce (u16), stream id (u16), sequence number (u32) and transmit
//! timestamp (u64, `CLOCK_MONOTONIC` ns), all big-endian. Layer-2 frames use
//! the local experimental EtherType 0x88B5 with the signature right after
//! the Ethernet header; layer-3 frames are IPv4/UDP (198.18.0.0/15) with the
//! signature as the first UDP payload bytes. Frame sizes include the 4-byte
//! FCS the kernel adds, so a "64-byte frame" is 60 bytes handed to the socket.

/// Magic at the start of the signature.
pub const MAGIC: u16 = 0x4C59;
/// Signature length in bytes.
pub const SIG_LEN: usize = 18;
/// Local experimental EtherType used by layer-2 test frames.
pub const ETHERTYPE_LAB: u16 = 0x88B5;
/// UDP destination port of layer-3 test frames.
pub const UDP_PORT: u16 = 0x4C59;
/// Smallest frame size (with FCS) the lab sends.
pub const MIN_FRAME: u16 = 64;
/// Largest frame size (with FCS) the lab sends.
pub const MAX_FRAME: u16 = 9216;

/// Decoded signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// Trial nonce: frames of other trials are ignored.
    pub nonce: u16,
    /// Stream id.
    pub stream: u16,
    /// Sequence number within the stream, from 0.
    pub seq: u32,
    /// Transmit timestamp, CLOCK_MONOTONIC ns.
    pub ts: u64,
}

impl Signature {
    /// Write the signature into `buf[..SIG_LEN]`.
    #[inline]
    pub fn encode(&self, buf: &mut [u8]) {
        buf[0..2].copy_from_slice(&MAGIC.to_be_bytes());
        buf[2..4].copy_from_slice(&self.nonce.to_be_bytes());
        buf[4..6].copy_from_slice(&self.stream.to_be_bytes());
        buf[6..10].copy_from_slice(&self.seq.to_be_bytes());
        buf[10..18].copy_from_slice(&self.ts.to_be_bytes());
    }

    /// Read a signature from `buf`, or `None` if too short or no magic.
    #[inline]
    pub fn decode(buf: &[u8]) -> Option<Signature> {
        if buf.len() < SIG_LEN || u16::from_be_bytes([buf[0], buf[1]]) != MAGIC {
            return None;
        }
        Some(Signature {
            nonce: u16::from_be_bytes([buf[2], buf[3]]),
            stream: u16::from_be_bytes([buf[4], buf[5]]),
            seq: u32::from_be_bytes([buf[6], buf[7], buf[8], buf[9]]),
            ts: u64::from_be_bytes([
                buf[10], buf[11], buf[12], buf[13], buf[14], buf[15], buf[16], buf[17],
            ]),
        })
    }
}

/// Find and decode the signature of a received frame (layer-2 lab frame,
/// IPv4/IPv6 UDP to the lab port, or a new-flow TCP SYN / ICMP echo
/// request, with up to two VLAN tags).
#[inline]
pub fn find_signature(frame: &[u8]) -> Option<Signature> {
    locate(frame).map(|(s, _)| s)
}

/// Like [`find_signature`], also returning the offset of the IP header
/// (0 for a layer-2 lab frame).
#[inline]
pub fn locate(frame: &[u8]) -> Option<(Signature, usize)> {
    locate_at(frame, mono_ns())
}

/// [`locate`] for a frame received at `now` (`CLOCK_MONOTONIC` ns): a
/// TCP test frame carries only the low 48 bits of its transmit time
/// ([`write_transport`]), completed from `now` (exact while the frame
/// is younger than 78 hours).
#[inline]
pub fn locate_at(frame: &[u8], now: u64) -> Option<(Signature, usize)> {
    let mut off = 12;
    loop {
        if frame.len() < off + 2 {
            return None;
        }
        let et = u16::from_be_bytes([frame[off], frame[off + 1]]);
        let ip = off + 2;
        let udp = match et {
            0x8100 | 0x88a8 => {
                off += 4;
                continue;
            }
            ETHERTYPE_LAB => return Signature::decode(&frame[ip..]).map(|s| (s, 0)),
            0x0800 => {
                if frame.len() < ip + 20 {
                    return None;
                }
                let l4 = ip + ((frame[ip] & 0x0f) as usize) * 4;
                match frame[ip + 9] {
                    17 => l4,
                    6 => return tcp_signature(frame, l4, now).map(|s| (s, ip)),
                    1 => return icmp_signature(frame, l4, 8).map(|s| (s, ip)),
                    _ => return None,
                }
            }
            // No extension headers: UDP right after the fixed header.
            0x86dd => {
                if frame.len() < ip + 40 {
                    return None;
                }
                match frame[ip + 6] {
                    17 => ip + 40,
                    6 => return tcp_signature(frame, ip + 40, now).map(|s| (s, ip)),
                    58 => return icmp_signature(frame, ip + 40, 128).map(|s| (s, ip)),
                    _ => return None,
                }
            }
            _ => return None,
        };
        if frame.len() < udp + 8 || u16::from_be_bytes([frame[udp + 2], frame[udp + 3]]) != UDP_PORT
        {
            return None;
        }
        return Signature::decode(&frame[udp + 8..]).map(|s| (s, ip));
    }
}

/// The signature of a new-flow TCP SYN whose header starts at `tcp`
/// (layout: [`write_transport`]).
#[inline]
fn tcp_signature(frame: &[u8], tcp: usize, now: u64) -> Option<Signature> {
    let h = frame.get(tcp..tcp + TCP_LEN + TCP_TS_LEN)?;
    let be16 = |i: usize| u16::from_be_bytes([h[i], h[i + 1]]);
    // Destination port, a bare 20-byte header and SYN alone.
    if be16(2) != UDP_PORT || h[12] != 0x50 || h[13] != TCP_SYN {
        return None;
    }
    let mut ts = [0u8; 8];
    ts[2..].copy_from_slice(&h[TCP_LEN..TCP_LEN + TCP_TS_LEN]);
    let low = u64::from_be_bytes(ts);
    Some(Signature {
        nonce: be16(14),
        stream: be16(18),
        seq: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        ts: now.wrapping_sub(now.wrapping_sub(low) & TS48_MASK),
    })
}

/// The signature of an ICMP (`echo` 8) or ICMPv6 (`echo` 128) echo
/// request whose header starts at `icmp`: right after its 8-byte header.
#[inline]
fn icmp_signature(frame: &[u8], icmp: usize, echo: u8) -> Option<Signature> {
    if frame.get(icmp) != Some(&echo) {
        return None;
    }
    Signature::decode(frame.get(icmp + 8..)?)
}

/// What a routed test frame must look like when it arrives: destination
/// MAC (the receiving host's), TTL / hop limit, and for IPv4 a valid header
/// checksum (a router that decrements the TTL must update it); with
/// `vlan`, exactly one 802.1Q tag of that VLAN (an L3VPN frame must leave
/// in its own VRF's VLAN: one in another VLAN leaked between VRFs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Arrival {
    /// Destination MAC address.
    pub dst_mac: Mac,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// The one 802.1Q tag the frame must carry (None: as sent).
    pub vlan: Option<u16>,
}

impl Arrival {
    /// True if the frame, whose IP header starts at `ip` (as returned by
    /// [`locate`]), matches.
    #[inline]
    pub fn check(&self, frame: &[u8], ip: usize) -> bool {
        if ip == 0 || frame.len() < ip + 20 || frame[0..6] != self.dst_mac {
            return false;
        }
        if let Some(v) = self.vlan {
            if ip != 18
                || frame[12..14] != [0x81, 0x00]
                || u16::from_be_bytes([frame[14], frame[15]]) & 0x0fff != v
            {
                return false;
            }
        }
        match frame[ip] >> 4 {
            4 => {
                let ihl = ((frame[ip] & 0x0f) as usize) * 4;
                frame[ip + 8] == self.ttl
                    && frame.len() >= ip + ihl
                    && ip_checksum(&frame[ip..ip + ihl]) == 0
            }
            6 => frame[ip + 7] == self.ttl,
            _ => false,
        }
    }
}

/// A MAC address.
pub type Mac = [u8; 6];

/// `base + i` on the low 32 bits of a MAC address.
#[inline]
pub fn mac_add(base: Mac, i: u32) -> Mac {
    let low = u32::from_be_bytes([base[2], base[3], base[4], base[5]]).wrapping_add(i);
    let l = low.to_be_bytes();
    [base[0], base[1], l[0], l[1], l[2], l[3]]
}

/// Format a MAC address as `aa:bb:cc:dd:ee:ff`.
pub fn mac_str(m: &Mac) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// IP addresses of a layer-3 test frame (UDP to port [`UDP_PORT`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    /// IPv4.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
    },
}

/// Smallest IPv6/UDP frame (with FCS) that carries the signature:
/// 14 + 40 + 8 + 18 + 4 bytes.
pub const MIN_FRAME_V6: u16 = 84;

/// Transport of the frames of a new-flow test (`new-flows:` in a plan;
/// docs/lab.md "New-flow rate"): every layer-3 frame a new flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NewFlows {
    /// Off: the frames of a stream repeat its flows.
    #[default]
    Off,
    /// UDP, a new source port per frame (`new-flows: true`).
    Udp,
    /// TCP SYNs (connection attempts), a new source port per frame.
    Tcp,
    /// ICMP / ICMPv6 echo requests, a new identifier per frame.
    Icmp,
    /// UDP, TCP and ICMP in turn, frame by frame.
    Mix,
}

impl NewFlows {
    /// The plan's spelling (`udp`, `tcp`, `icmp`, `mix`), or None.
    pub fn parse(s: &str) -> Option<NewFlows> {
        Some(match s {
            "udp" => NewFlows::Udp,
            "tcp" => NewFlows::Tcp,
            "icmp" => NewFlows::Icmp,
            "mix" => NewFlows::Mix,
            _ => return None,
        })
    }

    /// True unless [`NewFlows::Off`].
    pub fn on(self) -> bool {
        self != NewFlows::Off
    }

    /// The transport of frame `seq` of a stream (None: off).
    #[inline]
    pub fn proto(self, seq: u32) -> Option<FlowProto> {
        match self {
            NewFlows::Off => None,
            NewFlows::Udp => Some(FlowProto::Udp),
            NewFlows::Tcp => Some(FlowProto::Tcp),
            NewFlows::Icmp => Some(FlowProto::Icmp),
            NewFlows::Mix => {
                Some([FlowProto::Udp, FlowProto::Tcp, FlowProto::Icmp][seq as usize % 3])
            }
        }
    }
}

/// Transport of one layer-3 test frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlowProto {
    /// UDP to [`UDP_PORT`], the signature first in the payload.
    Udp,
    /// A TCP SYN to port [`UDP_PORT`] (layout: [`write_transport`]).
    Tcp,
    /// An ICMP / ICMPv6 echo request, the signature first in its data.
    Icmp,
}

/// A TCP header without options.
const TCP_LEN: usize = 20;
/// The TCP test frame's payload: the low 48 bits of the transmit time.
const TCP_TS_LEN: usize = 6;
const TS48_MASK: u64 = (1 << 48) - 1;
/// The TCP SYN flag.
const TCP_SYN: u8 = 0x02;

/// Turn the layer-3 UDP test frame `buf[..len]` (from [`build_headers`] or
/// [`build_l3_tagged`]; signature at `off`) into `proto` carrying `sg`,
/// with every checksum valid; `flow` is its UDP / TCP source port or ICMP
/// echo identifier (the new-flow key). The frame keeps its length: each
/// transport's header and signature take the 26 bytes after the IP
/// header, so the smallest sizes (64 bytes IPv4, 84 IPv6) hold all three:
///
/// - UDP: source port `flow`, then as [`Signature::encode`] and [`finish`];
/// - TCP: a SYN (no options) from port `flow` to [`UDP_PORT`] whose
///   sequence number is the signature's, window its nonce, urgent pointer
///   (ignored without URG) its stream, and 6 bytes of data the low 48
///   bits of its transmit time (the magic is the destination port);
/// - ICMP: an echo request (ICMPv6 for IPv6), identifier `flow`, sequence
///   the low 16 bits of the signature's, data the signature.
///
/// Checksums are summed over those 26 bytes only: the rest of the payload
/// must be zeros, as [`finish`] assumes too (the generator's buffers hold
/// one family and layout per trial, and nothing is written past them).
#[inline]
pub fn write_transport(
    buf: &mut [u8],
    len: usize,
    off: usize,
    l3: &L3,
    proto: FlowProto,
    flow: u16,
    sg: &Signature,
) {
    let l4 = off - 8;
    let v6 = matches!(l3, L3::V6 { .. });
    let ip = if v6 { l4 - 40 } else { l4 - 20 };
    let l4_len = (len - l4) as u32;
    let (num, pseudo) = match (proto, v6) {
        (FlowProto::Udp, _) => {
            buf[l4..l4 + 2].copy_from_slice(&flow.to_be_bytes());
            sg.encode(&mut buf[off..off + SIG_LEN]);
            // finish() works on the untagged layout (IP header at 14).
            finish(&mut buf[ip - 14..], Some(l3));
            return;
        }
        (FlowProto::Tcp, _) => (6u8, true),
        (FlowProto::Icmp, false) => (1, false),
        (FlowProto::Icmp, true) => (58, true),
    };
    if v6 {
        buf[ip + 6] = num;
    } else {
        buf[ip + 9] = num;
        buf[ip + 10..ip + 12].fill(0);
        let c = ip_checksum(&buf[ip..ip + 20]);
        buf[ip + 10..ip + 12].copy_from_slice(&c.to_be_bytes());
    }
    let h = &mut buf[l4..l4 + TCP_LEN + TCP_TS_LEN];
    if proto == FlowProto::Tcp {
        h[0..2].copy_from_slice(&flow.to_be_bytes());
        h[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
        h[4..8].copy_from_slice(&sg.seq.to_be_bytes());
        h[8..12].fill(0);
        h[12] = 0x50;
        h[13] = TCP_SYN;
        h[14..16].copy_from_slice(&sg.nonce.to_be_bytes());
        h[16..18].fill(0);
        h[18..20].copy_from_slice(&sg.stream.to_be_bytes());
        h[20..26].copy_from_slice(&sg.ts.to_be_bytes()[2..]);
    } else {
        h[0] = if v6 { 128 } else { 8 };
        h[1] = 0;
        h[2..4].fill(0);
        h[4..6].copy_from_slice(&flow.to_be_bytes());
        h[6..8].copy_from_slice(&(sg.seq as u16).to_be_bytes());
        sg.encode(&mut h[8..8 + SIG_LEN]);
    }
    let mut s = 0;
    if pseudo {
        let addrs = if v6 {
            ip + 8..ip + 40
        } else {
            ip + 12..ip + 20
        };
        s = csum_add(s, &buf[addrs]);
        s = csum_add(s, &l4_len.to_be_bytes());
        s = csum_add(s, &[0, num]);
    }
    s = csum_add(s, &buf[l4..l4 + TCP_LEN + TCP_TS_LEN]);
    let c = csum_fold(s);
    let at = if proto == FlowProto::Tcp {
        l4 + 16
    } else {
        l4 + 2
    };
    buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// TTL / hop limit of the frames the generator sends.
pub const TTL: u8 = 64;

/// Internet checksum (RFC 1071) of `h`; 0 when `h` holds a valid one.
pub(crate) fn ip_checksum(h: &[u8]) -> u16 {
    let mut s: u32 = 0;
    for c in h.chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// Write the headers of a test frame of `size` bytes (with FCS) into `buf`
/// and return `(bytes to send, signature offset)`. The payload after the
/// signature is left as is (zeros from a fresh buffer). IPv6 frames need
/// [`finish`] after the signature is written (UDP checksum).
pub fn build_headers(
    buf: &mut [u8],
    size: u16,
    dst: Mac,
    src: Mac,
    l3: Option<&L3>,
) -> (usize, usize) {
    let len = (size.clamp(MIN_FRAME, MAX_FRAME) - 4) as usize;
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    match l3 {
        None => {
            buf[12..14].copy_from_slice(&ETHERTYPE_LAB.to_be_bytes());
            (len, 14)
        }
        Some(L3::V4 { src, dst }) => {
            buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip_len = (len - 14) as u16;
            let ip = &mut buf[14..34];
            ip[0] = 0x45;
            ip[1] = 0;
            ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
            ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
            ip[8] = TTL;
            ip[9] = 17;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(src);
            ip[16..20].copy_from_slice(dst);
            let c = ip_checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let udp = &mut buf[34..42];
            udp[0..2].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            (len, 42)
        }
        Some(L3::V6 { src, dst }) => {
            // Never shorter than headers + signature (plans refuse such sizes).
            let len = len.max(MIN_FRAME_V6 as usize - 4);
            buf[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            let pl = (len - 54) as u16;
            let ip = &mut buf[14..54];
            ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
            ip[4..6].copy_from_slice(&pl.to_be_bytes());
            ip[6] = 17;
            ip[7] = TTL;
            ip[8..24].copy_from_slice(src);
            ip[24..40].copy_from_slice(dst);
            let udp = &mut buf[54..62];
            udp[0..2].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[4..6].copy_from_slice(&pl.to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            (len, 62)
        }
    }
}

/// Like [`build_headers`] for a layer-2 lab frame carrying an 802.1Q tag
/// (VLAN `vid`, priority 0) between the MAC addresses and the lab
/// EtherType; the tag counts in `size`.
pub fn build_l2_tagged(buf: &mut [u8], size: u16, dst: Mac, src: Mac, vid: u16) -> (usize, usize) {
    let len = (size.clamp(MIN_FRAME, MAX_FRAME) - 4) as usize;
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    buf[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    buf[16..18].copy_from_slice(&ETHERTYPE_LAB.to_be_bytes());
    (len, 18)
}

/// Like [`build_headers`] for a layer-3 frame carrying an 802.1Q tag
/// (VLAN `vid`, priority 0) between the MAC addresses and the IP
/// EtherType; the tag counts in `size` (a "68-byte" tagged IPv4 frame is
/// a 64-byte one with the tag). Complete it with [`finish_tagged`].
pub fn build_l3_tagged(
    buf: &mut [u8],
    size: u16,
    dst: Mac,
    src: Mac,
    l3: &L3,
    vid: u16,
) -> (usize, usize) {
    // The untagged frame 4 bytes shorter, 4 bytes in; then the addresses
    // and the tag in front of its EtherType.
    let (len, off) = build_headers(
        &mut buf[4..],
        size.max(MIN_FRAME + 4) - 4,
        dst,
        src,
        Some(l3),
    );
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
    buf[14..16].copy_from_slice(&(vid & 0x0fff).to_be_bytes());
    (len + 4, off + 4)
}

/// [`finish`] for a frame from [`build_l3_tagged`].
#[inline]
pub fn finish_tagged(buf: &mut [u8], l3: Option<&L3>) {
    finish(&mut buf[4..], l3)
}

/// MAC of the emulated host on tester port `p` in VLAN `vid` (an L3VPN
/// customer: one per VRF, the same addresses in every VRF):
/// `02:4c:<p+1>:01:<vid>`.
pub fn vlan_host_mac(p: usize, vid: u16) -> Mac {
    let v = vid.to_be_bytes();
    [0x02, 0x4c, (p + 1) as u8, 0x01, v[0], v[1]]
}

/// Complete a frame after its signature was written: the UDP checksum of
/// IPv6 frames (mandatory there). Summed over the pseudo-header, the UDP
/// header and the signature only: the rest of the payload must be zeros,
/// which holds for the generator's buffers (fresh per trial, and nothing
/// is ever written past the signature).
#[inline]
pub fn finish(buf: &mut [u8], l3: Option<&L3>) {
    if let Some(L3::V6 { .. }) = l3 {
        let mut s = csum_add(0, &buf[22..54]); // source + destination
        s = csum_add(s, &[0, 0]);
        s = csum_add(s, &buf[58..60]); // UDP length (upper-layer length)
        s = csum_add(s, &[0, 17]);
        s = csum_add(s, &buf[54..62 + SIG_LEN]);
        let c = match csum_fold(s) {
            0 => 0xffff,
            c => c,
        };
        buf[60..62].copy_from_slice(&c.to_be_bytes());
    }
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own; CLOCK_MONOTONIC
    // is always available on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signature_roundtrip() {
        let s = Signature {
            nonce: 0xbeef,
            stream: 7,
            seq: 0xdead_beef,
            ts: 0x0102_0304_0506_0708,
        };
        let mut b = [0u8; SIG_LEN];
        s.encode(&mut b);
        assert_eq!(Signature::decode(&b), Some(s));
        b[0] = 0;
        assert_eq!(Signature::decode(&b), None);
        assert_eq!(Signature::decode(&b[..10]), None);
    }

    #[test]
    fn l2_and_l3_frames_carry_signature() {
        let s = Signature {
            nonce: 3,
            stream: 9,
            seq: 42,
            ts: 77,
        };
        let v4 = L3::V4 {
            src: [198, 18, 0, 2],
            dst: [198, 19, 0, 2],
        };
        for l3 in [None, Some(v4)] {
            let mut buf = vec![0u8; 9216];
            let (len, off) = build_headers(
                &mut buf,
                64,
                [2, 0, 0, 0, 0, 2],
                [2, 0, 0, 0, 0, 1],
                l3.as_ref(),
            );
            assert_eq!(len, 60);
            s.encode(&mut buf[off..]);
            finish(&mut buf, l3.as_ref());
            assert_eq!(find_signature(&buf[..len]), Some(s));
            if l3.is_some() {
                assert_eq!(ip_checksum(&buf[14..34]), 0);
                assert_eq!(locate(&buf[..len]), Some((s, 14)));
            }
        }
        // IPv6: the UDP checksum over the whole datagram verifies.
        let v6 = L3::V6 {
            src: host_ip6(0),
            dst: host_ip6(1),
        };
        for size in [MIN_FRAME_V6, 1518, 9216] {
            let mut buf = vec![0u8; 9216];
            let (len, off) = build_headers(&mut buf, size, [2; 6], [4; 6], Some(&v6));
            assert_eq!((len, off), (size as usize - 4, 62));
            s.encode(&mut buf[off..]);
            finish(&mut buf, Some(&v6));
            assert_eq!(locate(&buf[..len]), Some((s, 14)));
            let ulen = (len - 54) as u32;
            let mut c = csum_add(0, &buf[22..54]);
            c = csum_add(c, &ulen.to_be_bytes());
            c = csum_add(c, &[0, 0, 0, 17]);
            c = csum_add(c, &buf[54..len]);
            assert_eq!(csum_fold(c), 0, "size {size}");
            assert_eq!(u16::from_be_bytes([buf[18], buf[19]]) as u32, ulen);
        }
        // Arrival checks: destination MAC, TTL / hop limit, IPv4 checksum.
        let mut f = vec![0u8; 128];
        let (len, off) = build_headers(&mut f, 128, [2; 6], [4; 6], Some(&v4));
        s.encode(&mut f[off..]);
        let ok = Arrival {
            dst_mac: [2; 6],
            ttl: TTL,
            vlan: None,
        };
        assert!(ok.check(&f[..len], 14));
        assert!(!Arrival { ttl: TTL - 1, ..ok }.check(&f[..len], 14));
        assert!(!Arrival {
            dst_mac: [3; 6],
            ..ok
        }
        .check(&f[..len], 14));
        f[22] -= 1; // TTL decremented without a checksum update
        assert!(!Arrival { ttl: TTL - 1, ..ok }.check(&f[..len], 14));
        let (len, off) = build_headers(&mut f, 128, [2; 6], [4; 6], Some(&v6));
        s.encode(&mut f[off..]);
        f[21] = TTL - 1;
        assert!(Arrival { ttl: TTL - 1, ..ok }.check(&f[..len], 14));
        assert!(!ok.check(&f[..len], 14));
        // Tagged frame.
        let mut buf = vec![0u8; 128];
        let (len, off) = build_headers(&mut buf, 128, [2; 6], [4; 6], None);
        let mut tagged = buf[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0, 0, 10]);
        tagged.extend_from_slice(&buf[12..len]);
        s.encode(&mut tagged[off + 4..]);
        assert_eq!(find_signature(&tagged), Some(s));
        assert_eq!(find_signature(&[0u8; 10]), None);
    }

    #[test]
    fn tagged_layer3_frames_and_their_arrival_check() {
        let s = Signature {
            nonce: 5,
            stream: 2,
            seq: 77,
            ts: 9,
        };
        let v4 = L3::V4 {
            src: host_ip(0),
            dst: host_ip(1),
        };
        let v6 = L3::V6 {
            src: host_ip6(0),
            dst: host_ip6(1),
        };
        // 68 bytes: the smallest tagged IPv4 frame, 88 the IPv6 one.
        for (l3, size) in [(v4, 68u16), (v4, 1518), (v6, 88), (v6, 1518)] {
            let mut buf = vec![0u8; 9216];
            let (len, off) = build_l3_tagged(&mut buf, size, [2; 6], [4; 6], &l3, 4095 + 101);
            assert_eq!(len, size as usize - 4);
            assert_eq!(buf[12..16], [0x81, 0x00, 0x00, 100]);
            s.encode(&mut buf[off..off + SIG_LEN]);
            finish_tagged(&mut buf, Some(&l3));
            assert_eq!(locate(&buf[..len]), Some((s, 18)), "{l3:?} {size}");
            let f = &buf[..len];
            match l3 {
                L3::V4 { .. } => {
                    assert_eq!(f[16..18], [0x08, 0x00]);
                    assert_eq!(ip_checksum(&f[18..38]), 0);
                    assert_eq!(u16::from_be_bytes([f[20], f[21]]) as usize, len - 18);
                }
                L3::V6 { .. } => {
                    assert_eq!(f[16..18], [0x86, 0xdd]);
                    // The UDP checksum over the whole datagram verifies.
                    let ulen = (len - 58) as u32;
                    let mut c = csum_add(0, &f[26..58]);
                    c = csum_add(c, &ulen.to_be_bytes());
                    c = csum_add(c, &[0, 0, 0, 17]);
                    c = csum_add(c, &f[58..len]);
                    assert_eq!(csum_fold(c), 0, "size {size}");
                }
            }
            let ok = Arrival {
                dst_mac: [2; 6],
                ttl: TTL,
                vlan: Some(100),
            };
            assert!(ok.check(f, 18));
            // Another VLAN (a leak into another VRF), no tag expected, the
            // wrong TTL: not received.
            assert!(!Arrival {
                vlan: Some(101),
                ..ok
            }
            .check(f, 18));
            assert!(!Arrival { ttl: TTL - 2, ..ok }.check(f, 18));
            assert!(Arrival { vlan: None, ..ok }.check(f, 18));
        }
        // Two routers: TTL 62 and the checksum updated, in VLAN 100 only.
        let mut buf = vec![0u8; 128];
        let (len, off) = build_l3_tagged(&mut buf, 68, [2; 6], [4; 6], &v4, 100);
        s.encode(&mut buf[off..off + SIG_LEN]);
        buf[26] = TTL - 2;
        buf[28..30].fill(0);
        let c = ip_checksum(&buf[18..38]);
        buf[28..30].copy_from_slice(&c.to_be_bytes());
        let two = Arrival {
            dst_mac: [2; 6],
            ttl: TTL - 2,
            vlan: Some(100),
        };
        assert!(two.check(&buf[..len], 18));
        // The same frame untagged is not in its VLAN.
        let mut untagged = buf[..12].to_vec();
        untagged.extend_from_slice(&buf[16..len]);
        assert!(!two.check(&untagged, 14));
        assert_eq!(vlan_host_mac(1, 300), [2, 0x4c, 2, 1, 1, 44]);
    }

    /// TCP SYNs and ICMP echo requests of every family, tagged or not, at
    /// the smallest sizes and larger: checksums valid (parsed back with
    /// the `wire` crate), the engine's flow key is the new port or echo
    /// identifier, and the analyzer reads the same signature back.
    #[test]
    fn new_flow_transports_parse_back_with_valid_checksums() {
        use wire::ip::IpPair;
        let sg = Signature {
            nonce: 0xa1b2,
            stream: 3,
            seq: 0x0102_0304,
            // High bits set: the TCP frame carries 48 of them.
            ts: 0x00ab_cdef_0123_4567,
        };
        let v4 = L3::V4 {
            src: host_ip(0),
            dst: [198, 19, 7, 9],
        };
        let v6 = L3::V6 {
            src: host_ip6(0),
            dst: host_ip6(1),
        };
        let mut buf = vec![0u8; 9216];
        // One buffer for all, as the generator reuses its own: mixed
        // transports must not leave each other's bytes behind.
        for (l3, sizes) in [(v4, [64u16, 512, 1518]), (v6, [84, 512, 1518])] {
            for tagged in [false, true] {
                for size in sizes {
                    for proto in [FlowProto::Tcp, FlowProto::Icmp, FlowProto::Udp] {
                        let size = if tagged { size + 4 } else { size };
                        let (len, off) = if tagged {
                            build_l3_tagged(&mut buf, size, [2; 6], [4; 6], &l3, 100)
                        } else {
                            build_headers(&mut buf, size, [2; 6], [4; 6], Some(&l3))
                        };
                        write_transport(&mut buf, len, off, &l3, proto, 4242, &sg);
                        let f = &buf[..len];
                        let what = format!("{l3:?} tagged {tagged} {size} {proto:?}");
                        assert_eq!(len, size as usize - 4, "{what}");
                        let ip = if tagged { 18 } else { 14 };
                        let (pair, num, l4) = match l3 {
                            L3::V4 { src, dst } => {
                                let p = wire::ipv4::Packet::new_checked(&f[ip..]).unwrap();
                                assert!(p.verify_checksum(), "{what}");
                                let pair = IpPair::V4 {
                                    src: src.into(),
                                    dst: dst.into(),
                                };
                                (pair, u8::from(p.protocol()), p.payload().to_vec())
                            }
                            L3::V6 { src, dst } => {
                                let p = wire::ipv6::Packet::new_checked(&f[ip..]).unwrap();
                                let pair = IpPair::V6 {
                                    src: src.into(),
                                    dst: dst.into(),
                                };
                                (pair, u8::from(p.next_header()), p.payload().to_vec())
                            }
                        };
                        let hl = if let L3::V4 { .. } = l3 { 20 } else { 40 };
                        assert_eq!(l4.len(), len - ip - hl, "{what}");
                        match (proto, l3) {
                            (FlowProto::Tcp, _) => {
                                assert_eq!(num, 6, "{what}");
                                let t = wire::tcp::Packet::new_checked(&l4[..]).unwrap();
                                assert!(t.verify_checksum(&pair), "{what}");
                                assert_eq!((t.src_port(), t.dst_port()), (4242, UDP_PORT));
                                assert_eq!(t.flags().0 & 0x3f, 0x02, "SYN alone: {what}");
                                assert_eq!(t.header_len(), 20);
                                assert_eq!(t.seq_number(), sg.seq);
                            }
                            (FlowProto::Icmp, L3::V4 { .. }) => {
                                assert_eq!(num, 1, "{what}");
                                let m = wire::icmp::Packet::new_checked(&l4[..]).unwrap();
                                assert!(m.verify_checksum(), "{what}");
                                assert_eq!(m.msg_type(), wire::icmp::Message::EchoRequest);
                                assert_eq!(m.echo_ident(), 4242);
                                assert_eq!(m.echo_seq_no(), 0x0304);
                            }
                            (FlowProto::Icmp, L3::V6 { .. }) => {
                                assert_eq!(num, 58, "{what}");
                                let m = wire::icmpv6::Packet::new_checked(&l4[..]).unwrap();
                                assert!(m.verify_checksum(&pair), "{what}");
                                assert_eq!(m.msg_type(), wire::icmpv6::Message::EchoRequest);
                                assert_eq!(m.echo_ident(), 4242);
                            }
                            (FlowProto::Udp, _) => {
                                assert_eq!(num, 17, "{what}");
                                let u = wire::udp::Packet::new_checked(&l4[..]).unwrap();
                                if let L3::V6 { .. } = l3 {
                                    assert!(u.verify_checksum(&pair), "{what}");
                                }
                                assert_eq!(u.src_port(), 4242);
                            }
                        }
                        // The flow the inline engine keys on.
                        let d = dpi::packet::parse_ethernet(f).unwrap();
                        assert_eq!(d.tuple.sport, 4242, "{what}");
                        assert_eq!(d.tuple.proto, num);
                        if proto == FlowProto::Tcp {
                            assert_eq!(d.tcp_flags, dpi::packet::SYN);
                            assert_eq!(d.tuple.dport, UDP_PORT);
                        }
                        // The analyzer: the same signature, received 3 µs
                        // or 5 minutes later.
                        for late in [3_000, 300_000_000_000] {
                            assert_eq!(locate_at(f, sg.ts + late), Some((sg, ip)), "{what}");
                        }
                        let ok = Arrival {
                            dst_mac: [2; 6],
                            ttl: TTL,
                            vlan: tagged.then_some(100),
                        };
                        assert!(ok.check(f, ip), "{what}");
                    }
                }
            }
        }
        // Not the lab's: a SYN+ACK, another port, an echo reply.
        let (len, off) = build_headers(&mut buf, 64, [2; 6], [4; 6], Some(&v4));
        write_transport(&mut buf, len, off, &v4, FlowProto::Tcp, 7, &sg);
        buf[47] |= 0x10;
        assert_eq!(locate_at(&buf[..len], sg.ts), None);
        buf[47] = 0x02;
        buf[37] ^= 1;
        assert_eq!(locate_at(&buf[..len], sg.ts), None);
        write_transport(&mut buf, len, off, &v4, FlowProto::Icmp, 7, &sg);
        buf[34] = 0;
        assert_eq!(locate_at(&buf[..len], sg.ts), None);
    }

    #[test]
    fn new_flows_transport_per_frame() {
        assert_eq!(NewFlows::Off.proto(5), None);
        assert_eq!(NewFlows::Tcp.proto(5), Some(FlowProto::Tcp));
        let mix: Vec<_> = (0..4).map(|q| NewFlows::Mix.proto(q).unwrap()).collect();
        use FlowProto::*;
        assert_eq!(mix, [Udp, Tcp, Icmp, Udp]);
        assert_eq!(NewFlows::parse("icmp"), Some(NewFlows::Icmp));
        assert_eq!(NewFlows::parse("true"), None);
        assert!(!NewFlows::Off.on() && NewFlows::Mix.on());
    }

    #[test]
    fn tagged_layer2_frames() {
        let mut buf = vec![0xeeu8; 128];
        let (len, off) = build_l2_tagged(&mut buf, 64, [2; 6], [4; 6], 4095 + 101);
        assert_eq!((len, off), (60, 18));
        // VLAN id 12 bits (4196 & 0xfff = 100), priority 0, then the lab EtherType.
        assert_eq!(buf[12..18], [0x81, 0x00, 0x00, 100, 0x88, 0xb5]);
        let s = Signature {
            nonce: 7,
            stream: 3,
            seq: 9,
            ts: 11,
        };
        s.encode(&mut buf[off..off + SIG_LEN]);
        assert_eq!(locate(&buf[..len]), Some((s, 0)));
        let (len, _) = build_l2_tagged(&mut buf, 1518, [2; 6], [4; 6], 7);
        assert_eq!(len, 1514);
    }

    #[test]
    fn mac_arithmetic() {
        assert_eq!(mac_add([2, 1, 0, 0, 0, 0xff], 1), [2, 1, 0, 0, 1, 0]);
        assert_eq!(mac_str(&[2, 0, 0, 0, 0xab, 1]), "02:00:00:00:ab:01");
    }
}

/// MAC of the first emulated host on tester port `p` (0-based):
/// `02:4c:<p+1>:00:00:01`; host `i` is that plus `i`.
pub fn host_mac(p: usize) -> Mac {
    [0x02, 0x4c, (p + 1) as u8, 0, 0, 0x01]
}

/// IPv4 address of the emulated host on port `p`: 198.18.<p+1>.2.
pub fn host_ip(p: usize) -> [u8; 4] {
    [198, 18, (p + 1) as u8, 2]
}

/// IPv6 address of the emulated host on tester port `p` (0-based):
/// `2001:2:0:<p+1>::2` (benchmarking range).
pub fn host_ip6(p: usize) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[0..4].copy_from_slice(&[0x20, 0x01, 0x00, 0x02]);
    a[6..8].copy_from_slice(&((p + 1) as u16).to_be_bytes());
    a[15] = 2;
    a
}

fn csum_add(mut s: u32, data: &[u8]) -> u32 {
    for c in data.chunks(2) {
        s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    s
}

fn csum_fold(mut s: u32) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// If `frame` is an ARP request for `ip` or an IPv6 neighbour solicitation
/// for `ip6`, write the answer from host `mac` into `out` and return its
/// length (60 bytes for ARP, 86 for a neighbour advertisement).
pub fn neighbour_reply(
    frame: &[u8],
    mac: Mac,
    ip: [u8; 4],
    ip6: [u8; 16],
    out: &mut [u8],
) -> Option<usize> {
    if frame.len() < 42 || out.len() < 86 {
        return None;
    }
    let et = u16::from_be_bytes([frame[12], frame[13]]);
    if et == 0x0806 {
        let a = &frame[14..42];
        // htype 1, ptype IPv4, hlen 6, plen 4, op 1 (request), target ip.
        if a[0..8] != [0, 1, 8, 0, 6, 4, 0, 1] || a[24..28] != ip {
            return None;
        }
        out[..60].fill(0);
        out[0..6].copy_from_slice(&a[8..14]);
        out[6..12].copy_from_slice(&mac);
        out[12..14].copy_from_slice(&[0x08, 0x06]);
        let r = &mut out[14..42];
        r[0..8].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 2]);
        r[8..14].copy_from_slice(&mac);
        r[14..18].copy_from_slice(&ip);
        r[18..24].copy_from_slice(&a[8..14]);
        r[24..28].copy_from_slice(&a[14..18]);
        return Some(60);
    }
    if et == 0x86dd
        && frame.len() >= 78
        && frame[20] == 58
        && frame[54] == 135
        && frame[62..78] == ip6
    {
        let src6: [u8; 16] = frame[22..38].try_into().ok()?;
        let unspecified = src6 == [0u8; 16];
        let dst6: [u8; 16] = if unspecified {
            [0xff, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
        } else {
            src6
        };
        let dst_mac: Mac = if unspecified {
            [0x33, 0x33, 0, 0, 0, 1]
        } else {
            frame[6..12].try_into().ok()?
        };
        out[..86].fill(0);
        out[0..6].copy_from_slice(&dst_mac);
        out[6..12].copy_from_slice(&mac);
        out[12..14].copy_from_slice(&[0x86, 0xdd]);
        let ip6h = &mut out[14..54];
        ip6h[0] = 0x60;
        ip6h[4..6].copy_from_slice(&32u16.to_be_bytes());
        ip6h[6] = 58;
        ip6h[7] = 255;
        ip6h[8..24].copy_from_slice(&ip6);
        ip6h[24..40].copy_from_slice(&dst6);
        let icmp = &mut out[54..86];
        icmp[0] = 136;
        icmp[4] = if unspecified { 0x20 } else { 0x60 }; // (S)olicited, (O)verride
        icmp[8..24].copy_from_slice(&ip6);
        icmp[24] = 2; // target link-layer address option
        icmp[25] = 1;
        icmp[26..32].copy_from_slice(&mac);
        let mut s = csum_add(0, &ip6);
        s = csum_add(s, &dst6);
        s = csum_add(s, &[0, 0, 0, 32, 0, 0, 0, 58]);
        s = csum_add(s, &out[54..86]);
        let c = csum_fold(s);
        out[56..58].copy_from_slice(&c.to_be_bytes());
        return Some(86);
    }
    None
}

#[cfg(test)]
mod neighbour_tests {
    use super::*;

    #[test]
    fn answers_arp_for_its_address_only() {
        let mut req = [0u8; 60];
        req[0..6].copy_from_slice(&[0xff; 6]);
        req[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        req[12..14].copy_from_slice(&[8, 6]);
        req[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
        req[22..28].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        req[28..32].copy_from_slice(&[198, 18, 1, 1]);
        req[38..42].copy_from_slice(&[198, 18, 1, 2]);
        let mac = [2, 0x4c, 0, 0, 1, 1];
        let mut out = [0u8; 128];
        let n = neighbour_reply(&req, mac, [198, 18, 1, 2], host_ip6(0), &mut out).unwrap();
        assert_eq!(n, 60);
        assert_eq!(&out[0..6], &[2, 0, 0, 0, 0, 9]);
        assert_eq!(&out[20..22], &[0, 2]);
        assert_eq!(&out[22..28], &mac);
        assert_eq!(&out[28..32], &[198, 18, 1, 2]);
        assert_eq!(&out[38..42], &[198, 18, 1, 1]);
        assert!(neighbour_reply(&req, mac, [198, 18, 1, 3], host_ip6(0), &mut out).is_none());
    }

    #[test]
    fn answers_neighbour_solicitation_with_valid_checksum() {
        let target = host_ip6(0);
        let src6 = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut ns = [0u8; 86];
        ns[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        ns[12..14].copy_from_slice(&[0x86, 0xdd]);
        ns[14] = 0x60;
        ns[20] = 58;
        ns[22..38].copy_from_slice(&src6);
        ns[54] = 135;
        ns[62..78].copy_from_slice(&target);
        let mac = [2, 0x4c, 0, 0, 1, 1];
        let mut out = [0u8; 128];
        let n = neighbour_reply(&ns, mac, [0; 4], target, &mut out).unwrap();
        assert_eq!(n, 86);
        assert_eq!(out[54], 136);
        assert_eq!(&out[38..54], &src6);
        // Verify: checksum over pseudo-header + message folds to zero.
        let mut s = csum_add(0, &out[22..38]);
        s = csum_add(s, &out[38..54]);
        s = csum_add(s, &[0, 0, 0, 32, 0, 0, 0, 58]);
        s = csum_add(s, &out[54..86]);
        assert_eq!(csum_fold(s), 0);
    }
}
