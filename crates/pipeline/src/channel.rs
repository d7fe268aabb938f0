//! Port-channel load sharing: which member carries a frame.
//!
//! A flow always hashes to the same member (frames of a flow stay in
//! order); the fields hashed are the channel's `load-balance` setting.
//! When a member stops distributing, the control plane publishes the
//! channel with one member fewer and flows rehash over the rest.

use tables::l2::LoadBalance;

#[inline]
fn be16(b: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([b[o], b[o + 1]])
}

/// Mix `x` into `h` (a multiply-xorshift step: cheap, spreads low bits).
#[inline]
fn mix(h: u64, x: u64) -> u64 {
    let h = (h ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^ (h >> 29)
}

#[inline]
fn mac48(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

#[inline]
fn word(b: &[u8], o: usize) -> u64 {
    u64::from_be_bytes(b[o..o + 8].try_into().unwrap_or([0; 8]))
}

/// Flow hash of `frame`, whose EtherType (after any ingress tag) is at
/// `inner_off`. Symmetric in source and destination, so both directions
/// of a conversation pick the same member. Short or non-IP frames hash on
/// their MACs.
#[inline]
pub fn flow_hash(frame: &[u8], inner_off: usize, mode: LoadBalance) -> u32 {
    if frame.len() < 12 {
        return 0;
    }
    let (a, b) = (mac48(&frame[0..6]), mac48(&frame[6..12]));
    let l2 = mix(mix(0, a ^ b), a.wrapping_add(b));
    if mode == LoadBalance::L2 || frame.len() < inner_off + 2 {
        return l2 as u32 ^ (l2 >> 32) as u32;
    }
    let ip = inner_off + 2;
    let (mut h, l4, proto) = match be16(frame, inner_off) {
        0x0800 if frame.len() >= ip + 20 => {
            let s = u32::from_be_bytes(frame[ip + 12..ip + 16].try_into().unwrap_or([0; 4])) as u64;
            let d = u32::from_be_bytes(frame[ip + 16..ip + 20].try_into().unwrap_or([0; 4])) as u64;
            let ihl = (frame[ip] & 0x0f) as usize * 4;
            // Only first fragments carry ports.
            let frag = be16(frame, ip + 6) & 0x1fff != 0;
            let l4 = if frag { None } else { Some(ip + ihl.max(20)) };
            (mix(mix(0, s ^ d), s.wrapping_add(d)), l4, frame[ip + 9])
        }
        0x86dd if frame.len() >= ip + 40 => {
            let (s0, s1) = (word(frame, ip + 8), word(frame, ip + 16));
            let (d0, d1) = (word(frame, ip + 24), word(frame, ip + 32));
            let h = mix(mix(0, s0 ^ d0), s1 ^ d1);
            (
                mix(h, (s0 ^ s1).wrapping_add(d0 ^ d1)),
                Some(ip + 40),
                frame[ip + 6],
            )
        }
        _ => return l2 as u32 ^ (l2 >> 32) as u32,
    };
    if mode == LoadBalance::L3L4 && matches!(proto, 6 | 17 | 132) {
        if let Some(o) = l4.filter(|o| frame.len() >= o + 4) {
            let (sp, dp) = (be16(frame, o) as u64, be16(frame, o + 2) as u64);
            h = mix(mix(h, sp ^ dp), sp.wrapping_add(dp) | (proto as u64) << 20);
        }
    }
    h as u32 ^ (h >> 32) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp4(src: [u8; 4], dst: [u8; 4], sp: u16, dp: u16) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sp.to_be_bytes());
        f[36..38].copy_from_slice(&dp.to_be_bytes());
        f
    }

    #[test]
    fn symmetric_and_mode_dependent() {
        let a = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000);
        let mut b = udp4([10, 0, 0, 2], [10, 0, 0, 1], 2000, 1000);
        b.swap(0, 6); // swap MACs too
        for i in 0..6 {
            b.swap(i, i + 6);
        }
        for m in [LoadBalance::L2, LoadBalance::L3, LoadBalance::L3L4] {
            assert_eq!(flow_hash(&a, 12, m), flow_hash(&b, 12, m), "{m:?}");
        }
        let c = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1001, 2000);
        assert_eq!(
            flow_hash(&a, 12, LoadBalance::L3),
            flow_hash(&c, 12, LoadBalance::L3)
        );
        assert_ne!(
            flow_hash(&a, 12, LoadBalance::L3L4),
            flow_hash(&c, 12, LoadBalance::L3L4)
        );
        assert_eq!(
            flow_hash(&a, 12, LoadBalance::L2),
            flow_hash(&c, 12, LoadBalance::L2)
        );
    }

    #[test]
    fn spreads_flows_over_members() {
        let mut per = [0u32; 4];
        for sp in 0..4000u16 {
            let f = udp4([10, 0, 0, 1], [10, 0, 0, 2], 1024 + sp, 80);
            per[(flow_hash(&f, 12, LoadBalance::L3L4) % 4) as usize] += 1;
        }
        for n in per {
            assert!((800..1200).contains(&n), "{per:?}");
        }
    }

    #[test]
    fn short_and_odd_frames_do_not_panic() {
        for len in 0..80 {
            let f = udp4([1, 2, 3, 4], [5, 6, 7, 8], 1, 2);
            for off in [12usize, 16, 70, 200] {
                let _ = flow_hash(&f[..len.min(f.len())], off, LoadBalance::L3L4);
            }
        }
    }
}
