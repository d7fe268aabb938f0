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

/// Find and decode the signature of a received frame (layer-2 lab frame or
/// IPv4/UDP to the lab port, with up to two VLAN tags).
#[inline]
pub fn find_signature(frame: &[u8]) -> Option<Signature> {
    let mut off = 12;
    loop {
        if frame.len() < off + 2 {
            return None;
        }
        let et = u16::from_be_bytes([frame[off], frame[off + 1]]);
        match et {
            0x8100 | 0x88a8 => off += 4,
            ETHERTYPE_LAB => return Signature::decode(&frame[off + 2..]),
            0x0800 => {
                let ip = off + 2;
                if frame.len() < ip + 20 || frame[ip + 9] != 17 {
                    return None;
                }
                let ihl = ((frame[ip] & 0x0f) as usize) * 4;
                let udp = ip + ihl;
                if frame.len() < udp + 8
                    || u16::from_be_bytes([frame[udp + 2], frame[udp + 3]]) != UDP_PORT
                {
                    return None;
                }
                return Signature::decode(&frame[udp + 8..]);
            }
            _ => return None,
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

/// IPv4 addresses for layer-3 frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct L3 {
    /// Source address.
    pub src: [u8; 4],
    /// Destination address.
    pub dst: [u8; 4],
}

fn ip_checksum(h: &[u8]) -> u16 {
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
/// signature is left as is (zeros from a fresh buffer).
pub fn build_headers(
    buf: &mut [u8],
    size: u16,
    dst: Mac,
    src: Mac,
    l3: Option<L3>,
) -> (usize, usize) {
    let len = (size.clamp(MIN_FRAME, MAX_FRAME) - 4) as usize;
    buf[0..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    match l3 {
        None => {
            buf[12..14].copy_from_slice(&ETHERTYPE_LAB.to_be_bytes());
            (len, 14)
        }
        Some(a) => {
            buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            let ip_len = (len - 14) as u16;
            let ip = &mut buf[14..34];
            ip[0] = 0x45;
            ip[1] = 0;
            ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
            ip[4..8].copy_from_slice(&[0, 0, 0x40, 0]);
            ip[8] = 64;
            ip[9] = 17;
            ip[10..12].copy_from_slice(&[0, 0]);
            ip[12..16].copy_from_slice(&a.src);
            ip[16..20].copy_from_slice(&a.dst);
            let c = ip_checksum(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let udp = &mut buf[34..42];
            udp[0..2].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[2..4].copy_from_slice(&UDP_PORT.to_be_bytes());
            udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
            udp[6..8].copy_from_slice(&[0, 0]);
            (len, 42)
        }
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
        for l3 in [
            None,
            Some(L3 {
                src: [198, 18, 0, 2],
                dst: [198, 19, 0, 2],
            }),
        ] {
            let mut buf = vec![0u8; 9216];
            let (len, off) =
                build_headers(&mut buf, 64, [2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1], l3);
            assert_eq!(len, 60);
            s.encode(&mut buf[off..]);
            assert_eq!(find_signature(&buf[..len]), Some(s));
            if l3.is_some() {
                assert_eq!(ip_checksum(&buf[14..34]), 0);
            }
        }
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
    fn mac_arithmetic() {
        assert_eq!(mac_add([2, 1, 0, 0, 0, 0xff], 1), [2, 1, 0, 0, 1, 0]);
        assert_eq!(mac_str(&[2, 0, 0, 0, 0xab, 1]), "02:00:00:00:ab:01");
    }
}
