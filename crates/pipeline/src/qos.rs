//! QoS actions: DSCP re-marking in place ([`set_dscp`], [`dscp`]) and
//! per-class egress queues with a strict-priority + deficit-round-robin
//! scheduler ([`EgressQueues`]), for when an egress port's TX ring is full.
//!
//! Reads/writes: the IP header of a frame (re-marking); the queues' own
//! preallocated buffers and the TX slots lent by a [`TxSink`] (queues).
//! No allocation after [`EgressQueues::new`], no locks, no system calls.
//! Policers are in [`tables::qos`]; design and figures: `docs/qos.md`.

use crate::counters::Dest;
use wire::checksum;

// ---------------------------------------------------------------------
// DSCP re-marking.

/// IP version of a well-formed header at `frame[l3_off..]` — the checks of
/// `wire`'s `check_len`: IPv4 with `20 ≤ IHL·4 ≤ total length ≤ bytes
/// left`, IPv6 with `40 + payload length ≤ bytes left` — else `None`.
#[inline]
fn ip_version(frame: &[u8], l3_off: usize) -> Option<u8> {
    let ip = frame.get(l3_off..)?;
    match ip.first()? >> 4 {
        4 if ip.len() >= 20 => {
            let hl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            (hl >= 20 && total >= hl && total <= ip.len()).then_some(4)
        }
        6 if ip.len() >= 40 => {
            let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            (40 + payload <= ip.len()).then_some(6)
        }
        _ => None,
    }
}

/// Set the DSCP of the IP packet at `l3_off` in `frame`, keeping the ECN
/// bits: IPv4 TOS (header checksum updated incrementally, RFC 1624 eqn. 3
/// — the result equals a full recompute when the old checksum was right),
/// IPv6 traffic class. Returns false, frame untouched, if `dscp > 63` or
/// there is no well-formed IPv4/IPv6 header at `l3_off` (same checks as
/// `wire`'s `check_len`; the IPv4 checksum is not verified — an incremental
/// update keeps a bad one bad).
#[inline]
pub fn set_dscp(frame: &mut [u8], l3_off: usize, dscp: u8) -> bool {
    if dscp > 63 {
        return false;
    }
    match ip_version(frame, l3_off) {
        Some(4) => {
            let ip = &mut frame[l3_off..];
            let old = u16::from_be_bytes([ip[0], ip[1]]);
            ip[1] = (dscp << 2) | (ip[1] & 0x03);
            let new = u16::from_be_bytes([ip[0], ip[1]]);
            if new != old {
                let c = checksum::update(u16::from_be_bytes([ip[10], ip[11]]), old, new);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
            }
            true
        }
        Some(6) => {
            // Version (4 bits), traffic class (8 bits: DSCP 6 + ECN 2),
            // flow label (20 bits).
            let ip = &mut frame[l3_off..];
            let ecn = (ip[1] >> 4) & 0x03;
            let tc = (dscp << 2) | ecn;
            ip[0] = 0x60 | (tc >> 4);
            ip[1] = (tc << 4) | (ip[1] & 0x0f);
            true
        }
        _ => false,
    }
}

/// DSCP of the IP packet at `l3_off` in `frame` (`None` if there is no
/// well-formed IPv4/IPv6 header there, as for [`set_dscp`]).
#[inline]
pub fn dscp(frame: &[u8], l3_off: usize) -> Option<u8> {
    let v = ip_version(frame, l3_off)?;
    let ip = &frame[l3_off..];
    Some(if v == 4 {
        ip[1] >> 2
    } else {
        ((ip[0] & 0x0f) << 2) | (ip[1] >> 6)
    })
}

// ---------------------------------------------------------------------
// Egress queues.

/// One class queue of an [`EgressQueues`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSpec {
    /// Strict priority: served before every weighted queue; several are
    /// served in index order (lower index first).
    pub priority: bool,
    /// Share of the weighted (non-priority) queues: the DRR quantum is
    /// `weight × DRR_QUANTUM` bytes. 0 counts as 1. Ignored for priority
    /// queues.
    pub weight: u32,
    /// Frames the queue holds; more are tail-dropped.
    pub depth: usize,
}

/// Bytes of DRR credit per unit of weight per round: a full-size standard
/// frame. Jumbo frames need several rounds of credit (as DRR allows),
/// which keeps a round short for small weights.
pub const DRR_QUANTUM: u64 = 1536;

/// Where [`EgressQueues::drain`] writes frames: an egress port's TX ring.
pub trait TxSink {
    /// The next free TX slot, or `None` if the ring is full.
    fn slot(&mut self) -> Option<&mut [u8]>;
    /// The frame of class `class`, `len` bytes to `dest`, was written
    /// into the slot last lent by `slot`: queue it for transmit (and
    /// count it).
    fn commit(&mut self, class: usize, len: usize, dest: Dest);
}

/// Any port is a sink (the class is not counted).
impl<P: io::Port + ?Sized> TxSink for P {
    #[inline]
    fn slot(&mut self) -> Option<&mut [u8]> {
        self.tx_slot()
    }

    #[inline]
    fn commit(&mut self, _class: usize, len: usize, _dest: Dest) {
        self.tx_commit(len)
    }
}

/// A FIFO of frames in fixed-size slots of one preallocated buffer.
struct ClassQueue {
    /// `depth` slots of `stride` bytes.
    buf: Box<[u8]>,
    lens: Box<[u32]>,
    head: usize,
    len: usize,
    bytes: usize,
    priority: bool,
    quantum: u64,
    deficit: u64,
}

impl ClassQueue {
    #[inline]
    fn depth(&self) -> usize {
        self.lens.len()
    }

    #[inline]
    fn head_len(&self) -> usize {
        self.lens[self.head] as usize
    }
}

/// One worker's queues for one egress port: a class queue per
/// [`QueueSpec`], each preallocated to `depth` frames of `max_frame` bytes,
/// and the scheduler's state. Nothing allocates after [`new`](Self::new).
///
/// Scheduling ([`drain`](Self::drain)): strict-priority queues first,
/// lower index first; then deficit round robin (Shreedhar & Varghese 1995)
/// over the weighted queues by bytes. A weighted queue's visit adds its
/// quantum to its deficit once, then sends head frames while they fit in
/// the deficit; a queue that empties loses its deficit, an empty queue is
/// skipped without credit. Deficits and the round-robin position persist
/// across calls, so a ring that fills mid-visit resumes the same visit.
pub struct EgressQueues {
    specs: Box<[QueueSpec]>,
    queues: Box<[ClassQueue]>,
    /// Indices of the strict-priority queues, in service order.
    prio: Box<[usize]>,
    /// Indices of the weighted queues, in round-robin order.
    weighted: Box<[usize]>,
    /// Round-robin position in `weighted`.
    rr: usize,
    /// The queue at `rr` has not yet had its quantum for this visit.
    fresh: bool,
    prio_frames: usize,
    weighted_frames: usize,
    stride: usize,
    max_frame: usize,
    slot_too_small: u64,
}

impl EgressQueues {
    /// Queues for `specs` (at most `u32::MAX` bytes a frame). Memory:
    /// `Σ depth × max_frame` bytes (rounded up to 64 a slot), zeroed
    /// lazily by the OS: only pages frames are written to become
    /// resident.
    pub fn new(specs: &[QueueSpec], max_frame: usize) -> EgressQueues {
        let max_frame = max_frame.min(u32::MAX as usize);
        let stride = max_frame.div_ceil(64) * 64;
        let queues: Box<[ClassQueue]> = specs
            .iter()
            .map(|s| ClassQueue {
                buf: vec![0u8; s.depth * stride].into_boxed_slice(),
                lens: vec![0u32; s.depth].into_boxed_slice(),
                head: 0,
                len: 0,
                bytes: 0,
                priority: s.priority,
                quantum: u64::from(s.weight.max(1)) * DRR_QUANTUM,
                deficit: 0,
            })
            .collect();
        let prio = (0..specs.len()).filter(|&q| specs[q].priority).collect();
        let weighted = (0..specs.len()).filter(|&q| !specs[q].priority).collect();
        EgressQueues {
            specs: specs.into(),
            queues,
            prio,
            weighted,
            rr: 0,
            fresh: true,
            prio_frames: 0,
            weighted_frames: 0,
            stride,
            max_frame,
            slot_too_small: 0,
        }
    }

    /// Number of class queues.
    /// The specs the queues were built from.
    pub fn specs(&self) -> &[QueueSpec] {
        &self.specs
    }

    #[inline]
    pub fn classes(&self) -> usize {
        self.queues.len()
    }

    /// Queue a copy of `frame` in class queue `q`. False (nothing queued;
    /// the caller counts the drop for the class): the queue is full (tail
    /// drop), `frame` is longer than `max_frame`, or there is no queue `q`.
    #[inline]
    pub fn enqueue(&mut self, q: usize, frame: &[u8]) -> bool {
        if frame.len() > self.max_frame {
            return false;
        }
        let Some(cq) = self.queues.get_mut(q) else {
            return false;
        };
        let depth = cq.depth();
        if cq.len == depth {
            return false;
        }
        let mut i = cq.head + cq.len;
        if i >= depth {
            i -= depth;
        }
        let off = i * self.stride;
        cq.buf[off..off + frame.len()].copy_from_slice(frame);
        cq.lens[i] = frame.len() as u32;
        cq.len += 1;
        cq.bytes += frame.len();
        if cq.priority {
            self.prio_frames += 1;
        } else {
            self.weighted_frames += 1;
        }
        true
    }

    /// True if no class holds a frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.prio_frames + self.weighted_frames == 0
    }

    /// Frames in class queue `q` (0 if there is none).
    #[inline]
    pub fn len(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |c| c.len)
    }

    /// Bytes in class queue `q` (0 if there is none).
    #[inline]
    pub fn bytes(&self, q: usize) -> usize {
        self.queues.get(q).map_or(0, |c| c.bytes)
    }

    /// Frames in all classes.
    #[inline]
    pub fn total_len(&self) -> usize {
        self.prio_frames + self.weighted_frames
    }

    /// Frames dropped by [`drain`](Self::drain) because a TX slot was
    /// shorter than the frame (never with `io` ports, whose slots hold
    /// `MAX_FRAME_LEN` bytes, when `max_frame` is at most that).
    pub fn slot_too_small(&self) -> u64 {
        self.slot_too_small
    }

    /// Drop every queued frame (e.g. the port went down); returns how
    /// many. Deficits and the round-robin position are reset.
    pub fn clear(&mut self) -> usize {
        let n = self.total_len();
        for cq in self.queues.iter_mut() {
            cq.head = 0;
            cq.len = 0;
            cq.bytes = 0;
            cq.deficit = 0;
        }
        self.prio_frames = 0;
        self.weighted_frames = 0;
        self.rr = 0;
        self.fresh = true;
        n
    }

    /// Move frames to `sink` in scheduler order (see the type's
    /// documentation) until the queues are empty or `sink.slot()` returns
    /// `None` (ring full: the rest stays queued for the next call). Calls
    /// `sink.commit(class, len)` for each frame written. Returns the
    /// frames sent.
    pub fn drain<S: TxSink + ?Sized>(&mut self, sink: &mut S) -> usize {
        let mut sent = 0;
        while !self.is_empty() {
            let Some(slot) = sink.slot() else {
                break;
            };
            let (q, prio) = if self.prio_frames > 0 {
                (self.pick_prio(), true)
            } else {
                (self.pick_weighted(), false)
            };
            let stride = self.stride;
            let cq = &mut self.queues[q];
            let n = cq.head_len();
            let ok = slot.len() >= n;
            let mut dest = Dest::Unicast;
            if ok {
                let off = cq.head * stride;
                slot[..n].copy_from_slice(&cq.buf[off..off + n]);
                dest = Dest::of(&slot[..n]);
            }
            cq.head += 1;
            if cq.head == cq.depth() {
                cq.head = 0;
            }
            cq.len -= 1;
            cq.bytes -= n;
            if prio {
                self.prio_frames -= 1;
            } else {
                self.weighted_frames -= 1;
                cq.deficit -= n as u64;
                if cq.len == 0 {
                    cq.deficit = 0;
                    self.advance();
                }
            }
            if ok {
                sink.commit(q, n, dest);
                sent += 1;
            } else {
                self.slot_too_small += 1;
            }
        }
        sent
    }

    /// The first non-empty strict-priority queue (`prio_frames > 0`).
    #[inline]
    fn pick_prio(&self) -> usize {
        for &q in self.prio.iter() {
            if self.queues[q].len > 0 {
                return q;
            }
        }
        unreachable!("prio_frames > 0 with every priority queue empty")
    }

    /// The weighted queue to send from next (`weighted_frames > 0`): the
    /// queue being visited if its head frame fits its deficit, else the
    /// next non-empty one in round-robin order, given its quantum on
    /// arrival. Terminates: every full round adds at least
    /// `DRR_QUANTUM` to each non-empty queue.
    #[inline]
    fn pick_weighted(&mut self) -> usize {
        loop {
            let q = self.weighted[self.rr];
            let cq = &mut self.queues[q];
            if cq.len == 0 {
                cq.deficit = 0;
                self.advance();
                continue;
            }
            if self.fresh {
                cq.deficit += cq.quantum;
                self.fresh = false;
            }
            if cq.head_len() as u64 <= cq.deficit {
                return q;
            }
            self.advance();
        }
    }

    #[inline]
    fn advance(&mut self) {
        self.rr += 1;
        if self.rr == self.weighted.len() {
            self.rr = 0;
        }
        self.fresh = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // --- re-marking -----------------------------------------------------

    fn v4(tos: u8, opts: usize) -> Vec<u8> {
        let hl = 20 + opts;
        let mut f = vec![0u8; 14 + hl + 8];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..];
        ip[0] = 0x40 | (hl / 4) as u8;
        ip[1] = tos;
        ip[2..4].copy_from_slice(&((hl + 8) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[192, 0, 2, 1]);
        ip[16..20].copy_from_slice(&[198, 51, 100, 7]);
        for (k, b) in ip[20..hl].iter_mut().enumerate() {
            *b = k as u8 | 1;
        }
        fill4(&mut f[14..]);
        f
    }

    fn fill4(ip: &mut [u8]) {
        let hl = usize::from(ip[0] & 0x0f) * 4;
        ip[10..12].fill(0);
        let c = checksum::finish(checksum::sum(&ip[..hl]));
        ip[10..12].copy_from_slice(&c.to_be_bytes());
    }

    /// The checksum a full recompute gives.
    fn recomputed4(ip: &[u8]) -> u16 {
        let hl = usize::from(ip[0] & 0x0f) * 4;
        let mut h = ip[..hl].to_vec();
        h[10..12].fill(0);
        checksum::finish(checksum::sum(&h))
    }

    fn v6(tc: u8, flow: u32) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 40 + 8];
        f[12..14].copy_from_slice(&[0x86, 0xdd]);
        let w = (6u32 << 28) | (u32::from(tc) << 20) | (flow & 0xf_ffff);
        f[14..18].copy_from_slice(&w.to_be_bytes());
        f[18..20].copy_from_slice(&8u16.to_be_bytes());
        f[20] = 17;
        f[21] = 64;
        f
    }

    #[test]
    fn v4_remark_all_dscp_ecn_checksum() {
        let mut r = testkit::routes::Rng(0x5eed);
        for opts in [0, 4, 40] {
            for tos in 0..=255u8 {
                for d in 0..64u8 {
                    let mut f = v4(tos, opts);
                    // Vary the other header words so checksums cover the range.
                    f[14 + 4..14 + 6].copy_from_slice(&(r.next() as u16).to_be_bytes());
                    f[14 + 12..14 + 20].copy_from_slice(&r.next().to_be_bytes());
                    fill4(&mut f[14..]);
                    let before = f.clone();
                    assert!(set_dscp(&mut f, 14, d));
                    assert_eq!(dscp(&f, 14), Some(d));
                    assert_eq!(f[15] & 3, tos & 3, "ECN kept");
                    let ip = &f[14..];
                    assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), recomputed4(ip));
                    assert!(checksum::verifies(checksum::sum(&ip[..20 + opts])));
                    // Nothing else changed.
                    for (k, (a, b)) in before.iter().zip(&f).enumerate() {
                        if ![15, 24, 25].contains(&k) {
                            assert_eq!(a, b, "byte {k}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn v4_remark_via_vlan_offset() {
        // Offset other than 14 (a tagged frame): only the IP header moves.
        let mut f = vec![0u8; 4];
        f.extend(v4(0x03, 0));
        assert!(set_dscp(&mut f, 18, 46));
        assert_eq!(dscp(&f, 18), Some(46));
        assert_eq!(f[19], (46 << 2) | 3);
        let ip = &f[18..];
        assert_eq!(u16::from_be_bytes([ip[10], ip[11]]), recomputed4(ip));
        // Matches what wire's own remark does.
        let mut g = v4(0x03, 0);
        let mut p = wire::Ipv4Packet::new_checked(&mut g[14..]).unwrap();
        p.remark_dscp(wire::Dscp::new(46).unwrap());
        assert_eq!(&f[18..], &g[14..]);
    }

    #[test]
    fn v6_remark_keeps_ecn_and_flow_label() {
        for tc in 0..=255u8 {
            for d in 0..64u8 {
                let mut f = v6(tc, 0xabcde);
                assert_eq!(dscp(&f, 14), Some(tc >> 2));
                assert!(set_dscp(&mut f, 14, d));
                assert_eq!(dscp(&f, 14), Some(d));
                let w = u32::from_be_bytes([f[14], f[15], f[16], f[17]]);
                assert_eq!(w >> 28, 6);
                assert_eq!((w >> 20) as u8, (d << 2) | (tc & 3));
                assert_eq!(w & 0xf_ffff, 0xabcde);
                let p = wire::Ipv6Packet::new_checked(&f[14..]).unwrap();
                assert_eq!(p.dscp().get(), d);
                assert_eq!(f[18..], v6(tc, 0xabcde)[18..]);
            }
        }
    }

    #[test]
    fn malformed_untouched() {
        let good4 = v4(0, 0);
        let good6 = v6(0, 0);
        // Truncated anywhere inside the header (and the declared length).
        for n in 0..good4.len() {
            let mut f = good4[..n].to_vec();
            assert!(!set_dscp(&mut f, 14, 10), "len {n}");
            assert_eq!(f, good4[..n]);
            assert_eq!(dscp(&f, 14), None);
        }
        for n in 0..good6.len() {
            let mut f = good6[..n].to_vec();
            assert!(!set_dscp(&mut f, 14, 10), "len {n}");
            assert_eq!(dscp(&f, 14), None);
        }
        let bad = |f: &mut Vec<u8>| {
            let g = f.clone();
            assert!(!set_dscp(f, 14, 10));
            assert_eq!(*f, g);
            assert_eq!(dscp(f, 14), None);
        };
        let mut f = good4.clone();
        f[14] = 0x44; // IHL 4
        bad(&mut f);
        let mut f = good4.clone();
        f[14] = 0x55; // version 5
        bad(&mut f);
        let mut f = good4.clone();
        f[16..18].copy_from_slice(&19u16.to_be_bytes()); // total < header
        bad(&mut f);
        let mut f = good4.clone();
        f[14] = 0x4f; // 60-byte header in a 28-byte packet
        bad(&mut f);
        let mut f = good6.clone();
        f[18..20].copy_from_slice(&9u16.to_be_bytes()); // payload past the end
        bad(&mut f);
        let mut f = good6.clone();
        f[14] = 0x00;
        bad(&mut f);
        // Offsets at or past the end, and DSCP out of range.
        let mut f = good4.clone();
        for off in [f.len(), f.len() + 1, usize::MAX] {
            assert!(!set_dscp(&mut f, off, 1));
            assert_eq!(dscp(&f, off), None);
        }
        assert!(!set_dscp(&mut f, 14, 64));
        assert!(!set_dscp(&mut f, 14, 255));
        assert_eq!(f, good4);
        // Ethernet padding after the packet is fine.
        let mut f = good4.clone();
        f.extend([0u8; 10]);
        assert!(set_dscp(&mut f, 14, 10));
    }

    /// Fuzz-style property: random bytes — pure noise, or biased towards
    /// plausible IPv4/IPv6 headers with random lengths, IHL and offsets —
    /// never panic; `true` exactly when the header is well-formed and the
    /// DSCP in range; `true` leaves the DSCP read back, ECN kept, every
    /// other byte unchanged and a valid IPv4 checksum valid; `false`
    /// leaves the frame untouched.
    #[test]
    fn random_bytes_never_panic() {
        let mut r = testkit::routes::Rng(0xdead_beef_cafe_f00d);
        let mut buf = [0u8; 160];
        let mut seen = [0u32; 3]; // rejected, accepted v4 with valid checksum, accepted v6
        for _ in 0..300_000 {
            let len = (r.next() % 161) as usize;
            for b in buf[..len].iter_mut() {
                *b = r.next() as u8;
            }
            let off = (r.next() % 100) as usize;
            let x = r.next();
            if len >= off + 40 {
                let f = &mut buf[off..len];
                match x % 3 {
                    0 => {
                        f[0] = 0x40 | (5 + (x >> 8) % 11) as u8;
                        let total = (x >> 16) % (f.len() as u64 + 8);
                        f[2..4].copy_from_slice(&(total as u16).to_be_bytes());
                        let hl = usize::from(f[0] & 15) * 4;
                        if hl <= f.len() && x & (1 << 40) != 0 {
                            fill4(f);
                        }
                    }
                    1 => {
                        f[0] = 0x60 | (f[0] & 0x0f);
                        let pl = (x >> 16) % (f.len() as u64);
                        f[4..6].copy_from_slice(&(pl as u16).to_be_bytes());
                    }
                    _ => {}
                }
            }
            let f = &mut buf[..len];
            let well_formed = ip_version(f, off).is_some();
            let ver = f.get(off).map(|b| b >> 4);
            let ecn = |f: &[u8]| {
                if f[off] >> 4 == 4 {
                    f[off + 1] & 3
                } else {
                    (f[off + 1] >> 4) & 3
                }
            };
            let hl = f.get(off).map_or(0, |b| usize::from(b & 15) * 4);
            let v4_valid = well_formed
                && ver == Some(4)
                && checksum::verifies(checksum::sum(&f[off..off + hl]));
            let d = (x >> 48) as u8 % 70;
            let before = f.to_vec();
            let ok = set_dscp(f, off, d);
            assert_eq!(ok, d < 64 && well_formed);
            assert_eq!(dscp(f, off).is_some(), well_formed);
            if ok {
                assert_eq!(dscp(f, off), Some(d));
                assert_eq!(ecn(f), ecn(&before));
                let changed: Vec<usize> = (0..len).filter(|&k| f[k] != before[k]).collect();
                let allowed: &[usize] = if ver == Some(4) {
                    &[off + 1, off + 10, off + 11]
                } else {
                    &[off, off + 1]
                };
                assert!(changed.iter().all(|k| allowed.contains(k)), "{changed:?}");
                if v4_valid {
                    assert!(checksum::verifies(checksum::sum(&f[off..off + hl])));
                    seen[1] += 1;
                } else if ver == Some(6) {
                    seen[2] += 1;
                }
            } else {
                assert_eq!(f, &before[..]);
                seen[0] += 1;
            }
        }
        // Every branch was exercised a good number of times.
        assert!(seen.iter().all(|&n| n > 5_000), "{seen:?}");
    }

    // --- queues ---------------------------------------------------------

    /// A TX ring that takes `room` frames (set before each call),
    /// recording (class, frame) in order.
    struct FakeSink {
        room: usize,
        slot: Vec<u8>,
        /// (class, frame): the frame's first 8 bytes unless `full`.
        sent: Vec<(usize, Vec<u8>)>,
        full: bool,
        bytes: Vec<u64>,
    }

    impl FakeSink {
        fn new(classes: usize) -> FakeSink {
            FakeSink {
                room: 0,
                slot: vec![0; io::MAX_FRAME_LEN],
                sent: Vec::new(),
                full: true,
                bytes: vec![0; classes],
            }
        }
    }

    impl TxSink for FakeSink {
        fn slot(&mut self) -> Option<&mut [u8]> {
            (self.room > 0).then_some(&mut self.slot[..])
        }

        fn commit(&mut self, class: usize, len: usize, _: Dest) {
            assert!(self.room > 0);
            self.room -= 1;
            let keep = if self.full { len } else { len.min(8) };
            self.sent.push((class, self.slot[..keep].to_vec()));
            self.bytes[class] += len as u64;
        }
    }

    fn frame(class: usize, seq: u32, len: usize) -> Vec<u8> {
        let mut f = vec![class as u8; len];
        f[1..5].copy_from_slice(&seq.to_be_bytes());
        f
    }

    fn spec(priority: bool, weight: u32, depth: usize) -> QueueSpec {
        QueueSpec {
            priority,
            weight,
            depth,
        }
    }

    #[test]
    fn tail_drop_at_depth_and_fifo() {
        let mut q = EgressQueues::new(&[spec(false, 1, 4), spec(false, 1, 0)], 9216 + 4);
        assert!(q.is_empty());
        for s in 0..4 {
            assert!(q.enqueue(0, &frame(0, s, 60 + s as usize)));
        }
        assert!(!q.enqueue(0, &frame(0, 99, 60)));
        assert!(!q.enqueue(1, &frame(1, 0, 60)), "depth 0: always full");
        assert!(!q.enqueue(2, &frame(2, 0, 60)), "no such class");
        assert!(!q.enqueue(0, &vec![0; 9221]), "over max_frame");
        assert_eq!((q.len(0), q.bytes(0), q.total_len()), (4, 246, 4));
        let mut s = FakeSink::new(2);
        s.room = 2;
        assert_eq!(q.drain(&mut s), 2);
        assert_eq!(q.len(0), 2);
        // Room again; wrap around the ring.
        for k in 4..6 {
            assert!(q.enqueue(0, &frame(0, k, 9216 + 4)));
        }
        assert!(!q.enqueue(0, &frame(0, 99, 60)));
        s.room = 100;
        assert_eq!(q.drain(&mut s), 4);
        assert!(q.is_empty());
        let seqs: Vec<u32> = s
            .sent
            .iter()
            .map(|(_, f)| u32::from_be_bytes(f[1..5].try_into().unwrap()))
            .collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4, 5]);
        assert_eq!(s.sent[0].1, frame(0, 0, 60));
        assert_eq!(s.sent[5].1, frame(0, 5, 9220));
        // Nothing to do: no slot is asked for.
        assert_eq!(q.drain(&mut s), 0);
    }

    #[test]
    fn strict_priority_starves_lower_classes() {
        // 0: priority, 1: priority, 2 and 3: weighted.
        let specs = [
            spec(true, 1, 64),
            spec(true, 1, 64),
            spec(false, 1, 64),
            spec(false, 3, 64),
        ];
        let mut q = EgressQueues::new(&specs, 1518);
        let mut s = FakeSink::new(4);
        let mut seq = [0u32; 4];
        for _round in 0..1000 {
            // Saturated: class 0 alone offers more than the ring takes.
            for (c, n) in seq.iter_mut().enumerate() {
                for _ in 0..16 {
                    if q.enqueue(c, &frame(c, *n, 200)) {
                        *n += 1;
                    }
                }
            }
            s.room = 8;
            assert_eq!(q.drain(&mut s), 8);
        }
        assert!(s.sent.iter().all(|(c, _)| *c == 0));
        assert_eq!(q.len(1), 64);
        // Class 0 idle: class 1 takes everything.
        let n0 = q.len(0);
        s.room = n0 + 10;
        q.drain(&mut s);
        assert!(s.sent[s.sent.len() - 10..].iter().all(|(c, _)| *c == 1));
        // Priority classes empty: the weighted ones get served, and a
        // priority frame that arrives preempts them at the next frame.
        s.room = 54 + 4;
        q.drain(&mut s);
        assert_eq!(q.len(1), 0);
        assert!(s.sent[s.sent.len() - 4..].iter().all(|(c, _)| *c >= 2));
        assert!(q.enqueue(1, &frame(1, 0, 64)));
        s.room = 2;
        q.drain(&mut s);
        let last: Vec<usize> = s.sent[s.sent.len() - 2..].iter().map(|x| x.0).collect();
        assert_eq!(last[0], 1);
        assert!(last[1] >= 2);
    }

    #[test]
    fn drr_weighted_3_to_1_by_bytes_mixed_sizes() {
        for k in [1usize, 3, 7, 32] {
            let specs = [spec(false, 3, 128), spec(false, 1, 128)];
            let mut q = EgressQueues::new(&specs, 9220);
            let mut s = FakeSink::new(2);
            s.full = false;
            let mut r = testkit::routes::Rng(0x1234 + k as u64);
            let sizes = [64usize, 128, 576, 1500, 9000];
            for _ in 0..20_000 {
                // Keep both classes backlogged with random sizes.
                for c in 0..2 {
                    while q.len(c) < 64 {
                        let len = sizes[(r.next() % sizes.len() as u64) as usize];
                        assert!(q.enqueue(c, &frame(c, 0, len)));
                    }
                }
                s.room = k;
                assert_eq!(q.drain(&mut s), k);
            }
            let ratio = s.bytes[0] as f64 / s.bytes[1] as f64;
            assert!((ratio - 3.0).abs() < 3.0 * 0.03, "k {k}: ratio {ratio}");
        }
    }

    #[test]
    fn drr_idle_queue_accumulates_no_deficit() {
        let specs = [spec(false, 1, 1024), spec(false, 1, 1024)];
        let mut q = EgressQueues::new(&specs, 1518);
        let mut s = FakeSink::new(2);
        // Class 1 sends alone for a long time while class 0 is empty.
        for _ in 0..1000 {
            for _ in 0..4 {
                assert!(q.enqueue(1, &frame(1, 0, 1000)));
            }
            s.room = 4;
            assert_eq!(q.drain(&mut s), 4);
        }
        assert_eq!(q.queues[0].deficit, 0);
        // Both backlogged now: equal weights share equally from the start;
        // class 0 gets no catch-up burst.
        for c in 0..2 {
            for _ in 0..200 {
                assert!(q.enqueue(c, &frame(c, 0, 1000)));
            }
        }
        let before = s.sent.len();
        s.room = 100;
        q.drain(&mut s);
        let n0 = s.sent[before..].iter().filter(|x| x.0 == 0).count();
        assert!((49..=51).contains(&n0), "class 0 got {n0} of 100");
        // A queue that empties during its visit loses its leftover credit.
        let mut q = EgressQueues::new(&specs, 1518);
        assert!(q.enqueue(0, &frame(0, 0, 64)));
        s.room = 10;
        q.drain(&mut s);
        assert_eq!(q.queues[0].deficit, 0);
    }

    #[test]
    fn drr_resumes_visit_across_calls() {
        // Equal weights, one slot per call: the deficit carries over, so
        // class 0 sends its whole quantum (1536 / 64 = 24 frames) before
        // class 1 starts, though each call moves one frame.
        let specs = [spec(false, 1, 64), spec(false, 1, 64)];
        let mut q = EgressQueues::new(&specs, 1518);
        for c in 0..2 {
            for i in 0..48 {
                assert!(q.enqueue(c, &frame(c, i, 64)));
            }
        }
        let mut s = FakeSink::new(2);
        for _ in 0..96 {
            s.room = 1;
            assert_eq!(q.drain(&mut s), 1);
        }
        let classes: Vec<usize> = s.sent.iter().map(|x| x.0).collect();
        let mut want = Vec::new();
        for c in [0, 1, 0, 1] {
            want.extend([c; 24]);
        }
        assert_eq!(classes, want);
    }

    #[test]
    fn jumbo_frames_with_small_weight_progress() {
        // Weight 1 (1536 bytes a round) still sends 9,000-byte frames,
        // sharing bytes evenly with a class of small frames.
        let specs = [spec(false, 1, 256), spec(false, 1, 256)];
        let mut q = EgressQueues::new(&specs, 9220);
        let mut s = FakeSink::new(2);
        s.full = false;
        for _ in 0..2000 {
            while q.len(0) < 8 {
                assert!(q.enqueue(0, &frame(0, 0, 9000)));
            }
            while q.len(1) < 200 {
                assert!(q.enqueue(1, &frame(1, 0, 100)));
            }
            s.room = 16;
            q.drain(&mut s);
        }
        let ratio = s.bytes[0] as f64 / s.bytes[1] as f64;
        assert!((ratio - 1.0).abs() < 0.05, "ratio {ratio}");
    }

    #[test]
    fn slot_too_small_drops_and_counts() {
        struct Small([u8; 2]);
        impl TxSink for Small {
            fn slot(&mut self) -> Option<&mut [u8]> {
                Some(&mut self.0[..])
            }
            fn commit(&mut self, _: usize, len: usize, _: Dest) {
                assert!(len <= 2);
            }
        }
        let mut q = EgressQueues::new(&[spec(true, 1, 4)], 64);
        assert!(q.enqueue(0, &[]));
        assert!(q.enqueue(0, &[1, 2, 3]));
        let mut s = Small([0; 2]);
        assert_eq!(q.drain(&mut s), 1, "the empty frame fits an empty slot");
        assert_eq!(q.slot_too_small(), 1);
        assert!(q.is_empty());
    }

    #[test]
    fn memory_port_is_a_sink() {
        let (mut port, peer) = io::MemoryPort::new("q0");
        let mut q = EgressQueues::new(&[spec(true, 1, 8), spec(false, 2, 8)], io::MAX_FRAME_LEN);
        assert!(q.enqueue(1, &frame(1, 7, 100)));
        assert!(q.enqueue(0, &frame(0, 8, 80)));
        assert_eq!(q.drain(&mut port), 2);
        io::Port::flush(&mut port).unwrap();
        let sent = peer.take_sent();
        assert_eq!(sent, vec![frame(0, 8, 80), frame(1, 7, 100)]);
        // A full ring stops the drain; the rest waits for the next call.
        peer.set_tx_capacity(Some(1));
        for i in 0..3 {
            assert!(q.enqueue(1, &frame(1, i, 100)));
        }
        let dynp: &mut dyn io::Port = &mut port;
        assert_eq!(q.drain(dynp), 1);
        assert_eq!(q.drain(dynp), 0, "ring full");
        assert_eq!(q.len(1), 2);
        peer.set_tx_capacity(Some(3));
        assert_eq!(q.drain(&mut port), 2);
        assert!(q.is_empty());
        assert!(q.enqueue(0, &frame(0, 9, 60)));
        assert_eq!(q.drain(&mut port), 0, "ring full");
        assert_eq!(q.clear(), 1);
    }

    #[test]
    fn clear_empties_everything() {
        let mut q = EgressQueues::new(&[spec(true, 1, 8), spec(false, 2, 8)], 128);
        for c in 0..2 {
            for _ in 0..5 {
                assert!(q.enqueue(c, &[0u8; 100]));
            }
        }
        assert_eq!(q.clear(), 10);
        assert!(q.is_empty());
        assert_eq!((q.len(0), q.len(1), q.bytes(1)), (0, 0, 0));
        for _ in 0..8 {
            assert!(q.enqueue(1, &[0u8; 100]));
        }
        assert_eq!(q.classes(), 2);
    }
}
