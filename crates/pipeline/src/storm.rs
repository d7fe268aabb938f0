//! Storm control: per-port ingress rate limits on broadcast, multicast
//! and unknown-unicast frames, and the loop-detect probe format.
//!
//! Reads: the storm table (per port: a limit per class, the action), the
//! layer-2 verdicts of a batch. Sets: over-limit frames to
//! `Drop(StormControl)`. Decides: which class a frame is (by its
//! destination address and, for unicast, by whether it is flooded) and
//! whether its port's bucket for that class has room. Emits: per port and
//! class drop counters, and a per-port "tripped" flag when the port's
//! action is to shut it down (the control plane's guard thread then
//! err-disables it).
//!
//! Each port is received by one worker, so its buckets live in that
//! worker ([`StormState`]) and the configured rate is exact. A token
//! bucket per class holds a tenth of a second of the rate (at least one
//! frame): short bursts pass, a sustained storm is cut to the rate.

use crate::l2::{Action, Verdict};
use tables::MAX_PORTS;

/// What storm control tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StormClass {
    /// Destination ff:ff:ff:ff:ff:ff.
    Broadcast = 0,
    /// Any other group address.
    Multicast = 1,
    /// A unicast destination the MAC table does not know (flooded).
    UnknownUnicast = 2,
}

pub use crate::counters::STORM_CLASSES;

impl StormClass {
    pub const ALL: [StormClass; STORM_CLASSES] = [
        StormClass::Broadcast,
        StormClass::Multicast,
        StormClass::UnknownUnicast,
    ];

    pub fn name(self) -> &'static str {
        match self {
            StormClass::Broadcast => "broadcast",
            StormClass::Multicast => "multicast",
            StormClass::UnknownUnicast => "unknown-unicast",
        }
    }

    /// The class of a frame the layer-2 stage decided `action` for, if
    /// storm control looks at it (known unicast and drops: no).
    #[inline]
    pub fn of(frame: &[u8], action: Action) -> Option<StormClass> {
        if frame.len() < 6 || matches!(action, Action::Drop(_) | Action::Control) {
            return None;
        }
        if frame[0] & 1 != 0 {
            if frame[..6] == [0xff; 6] {
                Some(StormClass::Broadcast)
            } else {
                Some(StormClass::Multicast)
            }
        } else if action == Action::Flood {
            Some(StormClass::UnknownUnicast)
        } else {
            None
        }
    }
}

/// What a limit counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StormUnit {
    Packets,
    /// Frame bytes (the Ethernet frame without FCS, as received).
    Bytes,
}

/// One class's limit: `rate` units per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StormLimit {
    pub rate: u64,
    pub unit: StormUnit,
}

impl StormLimit {
    /// Bucket size in units: a tenth of a second of the rate, at least
    /// one frame (one packet, or one jumbo frame of bytes).
    pub fn burst(&self) -> u64 {
        let floor = match self.unit {
            StormUnit::Packets => 1,
            StormUnit::Bytes => io::MAX_FRAME_LEN as u64,
        };
        (self.rate / 10).max(floor)
    }
}

/// A port's storm control.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PortStorm {
    /// Per [`StormClass`].
    pub limits: [Option<StormLimit>; STORM_CLASSES],
    /// Shut the port down (err-disable) on the first frame over a limit,
    /// instead of only dropping the excess.
    pub shutdown: bool,
}

/// The storm-control snapshot (absent when no port has storm control).
#[derive(Clone, Debug)]
pub struct StormTable {
    /// Per port id.
    pub ports: Box<[Option<PortStorm>]>,
    /// Bumped by every build: workers rebuild their buckets on a change.
    pub generation: u64,
}

impl StormTable {
    /// No limits, for port ids `0..ports` (a port beyond has none).
    pub fn new(generation: u64, ports: usize) -> StormTable {
        StormTable {
            ports: vec![None; ports.min(MAX_PORTS)].into(),
            generation,
        }
    }
}

/// Tokens are units × 10^9, so that a rate in units per second adds
/// `rate` tokens per nanosecond.
const SCALE: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, Default)]
struct Bucket {
    tokens: u64,
    max: u64,
    rate: u64,
    last_ns: u64,
}

impl Bucket {
    fn new(l: &StormLimit, now_ns: u64) -> Bucket {
        let max = l.burst().saturating_mul(SCALE);
        Bucket {
            tokens: max,
            max,
            rate: l.rate,
            last_ns: now_ns,
        }
    }

    #[inline]
    fn admit(&mut self, need: u64, now_ns: u64) -> bool {
        let dt = now_ns.saturating_sub(self.last_ns);
        self.last_ns = now_ns;
        // Gaps longer than a full refill are clamped: no overflow.
        if let Some(fill) = self.max.checked_div(self.rate) {
            let fill = fill + 1;
            let add = dt.min(fill).saturating_mul(self.rate);
            self.tokens = self.tokens.saturating_add(add).min(self.max);
        }
        let need = need.saturating_mul(SCALE);
        if self.tokens >= need {
            self.tokens -= need;
            true
        } else {
            false
        }
    }
}

/// A worker's storm-control buckets.
pub struct StormState {
    built_for: u64,
    /// Per port id, per class; `None` = no limit.
    buckets: Vec<[Option<Bucket>; STORM_CLASSES]>,
}

impl Default for StormState {
    fn default() -> Self {
        StormState {
            built_for: u64::MAX,
            buckets: Vec::new(),
        }
    }
}

impl StormState {
    /// Rebuild the buckets (full) when the table changed. Allocates, but
    /// only on a configuration change.
    pub fn sync(&mut self, t: &StormTable, now_ns: u64) {
        if self.built_for == t.generation {
            return;
        }
        self.built_for = t.generation;
        self.buckets = t
            .ports
            .iter()
            .map(|p| match p {
                Some(p) => p.limits.map(|l| l.map(|l| Bucket::new(&l, now_ns))),
                None => [None; STORM_CLASSES],
            })
            .collect();
    }

    /// Whether a frame of `len` bytes and class `class` received on
    /// `port` is within the port's limit (true when it has none).
    #[inline]
    pub fn admit(
        &mut self,
        t: &StormTable,
        port: u16,
        class: StormClass,
        len: usize,
        now_ns: u64,
    ) -> bool {
        let Some(Some(b)) = self
            .buckets
            .get_mut(port as usize)
            .map(|c| &mut c[class as usize])
        else {
            return true;
        };
        let unit = t
            .ports
            .get(port as usize)
            .and_then(|p| p.as_ref())
            .and_then(|p| p.limits[class as usize])
            .map_or(StormUnit::Packets, |l| l.unit);
        let need = match unit {
            StormUnit::Packets => 1,
            StormUnit::Bytes => len as u64,
        };
        b.admit(need, now_ns)
    }
}

/// Whether storm control drops this frame (`v` from the layer-2 stage).
/// Returns the class dropped, if dropped.
#[inline]
pub fn check(
    st: &mut StormState,
    t: &StormTable,
    port: u16,
    frame: &[u8],
    v: &Verdict,
    now_ns: u64,
) -> Option<StormClass> {
    let class = StormClass::of(frame, v.action)?;
    (!st.admit(t, port, class, frame.len(), now_ns)).then_some(class)
}

pub use crate::l2::LOOP_PROBE_MAC;
/// Marks a loop-detect probe's payload (after the EtherType
/// `l2::ETHERTYPE_LANYARD`).
pub const LOOP_PROBE_MAGIC: [u8; 8] = *b"LYLOOP1\0";
/// Bytes of a probe's payload: magic, switch id, port, VLAN, sequence.
pub const LOOP_PROBE_LEN: usize = 8 + 8 + 2 + 2 + 4;

/// What a loop-detect probe says: which switch sent it, out of which
/// port, in which VLAN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopProbe {
    pub switch_id: u64,
    pub port: u16,
    pub vlan: u16,
    pub seq: u32,
}

impl LoopProbe {
    /// The frame (untagged; egress adds the port's tag for `vlan`).
    pub fn frame(&self, src_mac: [u8; 6]) -> Vec<u8> {
        let mut f = Vec::with_capacity(64);
        f.extend_from_slice(&LOOP_PROBE_MAC);
        f.extend_from_slice(&src_mac);
        f.extend_from_slice(&crate::l2::ETHERTYPE_LANYARD.to_be_bytes());
        f.extend_from_slice(&LOOP_PROBE_MAGIC);
        f.extend_from_slice(&self.switch_id.to_be_bytes());
        f.extend_from_slice(&self.port.to_be_bytes());
        f.extend_from_slice(&self.vlan.to_be_bytes());
        f.extend_from_slice(&self.seq.to_be_bytes());
        f.resize(64, 0);
        f
    }

    /// Read a probe whose EtherType sits at `etype_off` (after the
    /// ingress tag); `None` if the frame is not one.
    #[inline]
    pub fn parse(frame: &[u8], etype_off: usize) -> Option<LoopProbe> {
        let b = frame.get(etype_off..etype_off + 2 + LOOP_PROBE_LEN)?;
        if frame.get(..6)? != LOOP_PROBE_MAC
            || u16::from_be_bytes([b[0], b[1]]) != crate::l2::ETHERTYPE_LANYARD
            || b[2..10] != LOOP_PROBE_MAGIC
        {
            return None;
        }
        let u = |o: usize, n: usize| b[o..o + n].iter().fold(0u64, |a, &x| a << 8 | u64::from(x));
        Some(LoopProbe {
            switch_id: u(10, 8),
            port: u(18, 2) as u16,
            vlan: u(20, 2) as u16,
            seq: u(22, 4) as u32,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::DropReason;

    fn verdict(action: Action) -> Verdict {
        Verdict {
            action,
            vlan: 10,
            inner_off: 12,
            pcp: 0,
        }
    }

    #[test]
    fn classes_by_destination_and_flooding() {
        let mut f = vec![0u8; 64];
        f[..6].copy_from_slice(&[0xff; 6]);
        assert_eq!(
            StormClass::of(&f, Action::Flood),
            Some(StormClass::Broadcast)
        );
        f[..6].copy_from_slice(&[0x01, 0, 0x5e, 0, 0, 1]);
        assert_eq!(
            StormClass::of(&f, Action::Flood),
            Some(StormClass::Multicast)
        );
        assert_eq!(
            StormClass::of(&f, Action::Mcast(3)),
            Some(StormClass::Multicast)
        );
        f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        assert_eq!(
            StormClass::of(&f, Action::Flood),
            Some(StormClass::UnknownUnicast)
        );
        assert_eq!(StormClass::of(&f, Action::Unicast(2)), None);
        assert_eq!(StormClass::of(&f, Action::Drop(DropReason::SamePort)), None);
        assert_eq!(StormClass::of(&f[..3], Action::Flood), None);
    }

    #[test]
    fn packet_limit_passes_burst_then_the_rate() {
        let mut t = StormTable::new(1, 8);
        let lim = StormLimit {
            rate: 1000,
            unit: StormUnit::Packets,
        };
        t.ports[3] = Some(PortStorm {
            limits: [Some(lim), None, None],
            shutdown: false,
        });
        let mut st = StormState::default();
        st.sync(&t, 0);
        let bcast = {
            let mut f = vec![0u8; 64];
            f[..6].copy_from_slice(&[0xff; 6]);
            f
        };
        let v = verdict(Action::Flood);
        // A burst of 100 (a tenth of a second) passes at once, no more.
        let passed = (0..500)
            .filter(|_| check(&mut st, &t, 3, &bcast, &v, 0).is_none())
            .count();
        assert_eq!(passed, 100);
        // Then 1,000 per second: one every millisecond, over 2 s.
        let mut passed = 0;
        for us in (0..2_000_000u64).step_by(100) {
            if check(&mut st, &t, 3, &bcast, &v, us * 1000 + 1).is_none() {
                passed += 1;
            }
        }
        assert!((1995..=2005).contains(&passed), "{passed}");
        // Other ports and classes are not limited.
        assert!(check(&mut st, &t, 4, &bcast, &v, 3_000_000_000).is_none());
        let mut mc = bcast.clone();
        mc[5] = 1;
        assert!((0..1000).all(|_| check(&mut st, &t, 3, &mc, &v, 3_000_000_000).is_none()));
    }

    #[test]
    fn byte_limit_counts_frame_bytes() {
        let mut t = StormTable::new(7, 8);
        t.ports[0] = Some(PortStorm {
            limits: [
                None,
                None,
                Some(StormLimit {
                    rate: 1_000_000, // 8 Mbit/s
                    unit: StormUnit::Bytes,
                }),
            ],
            shutdown: true,
        });
        let mut st = StormState::default();
        st.sync(&t, 0);
        let f = vec![0x02u8; 1000];
        let v = verdict(Action::Flood);
        // 100,000-byte bucket: 100 frames of 1,000 bytes.
        let passed = (0..1000)
            .filter(|_| check(&mut st, &t, 0, &f, &v, 5).is_none())
            .count();
        assert_eq!(passed, 100);
        // One second later: another 1,000,000 bytes' worth, capped at the bucket.
        let passed = (0..1000)
            .filter(|_| check(&mut st, &t, 0, &f, &v, 1_000_000_005).is_none())
            .count();
        assert_eq!(passed, 100);
        // A zero rate blocks the class after its one-frame floor.
        t.ports[0].as_mut().unwrap().limits[2] = Some(StormLimit {
            rate: 0,
            unit: StormUnit::Packets,
        });
        t.generation = 8;
        st.sync(&t, 0);
        let passed = (0..10)
            .filter(|k| check(&mut st, &t, 0, &f, &v, *k as u64 * 1_000_000_000).is_none())
            .count();
        assert_eq!(passed, 1);
    }

    #[test]
    fn probe_round_trip_and_rejects() {
        let p = LoopProbe {
            switch_id: 0x0102_0304_0506_0708,
            port: 5,
            vlan: 10,
            seq: 77,
        };
        let f = p.frame([2, 0, 0, 0, 0, 1]);
        assert_eq!(f.len(), 64);
        assert_eq!(LoopProbe::parse(&f, 12), Some(p));
        // With a tag in front (etype after it).
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0, 0, 10]);
        t.extend_from_slice(&f[12..]);
        assert_eq!(LoopProbe::parse(&t, 16), Some(p));
        let mut bad = f.clone();
        bad[14] ^= 1;
        assert_eq!(LoopProbe::parse(&bad, 12), None);
        assert_eq!(LoopProbe::parse(&f[..30], 12), None);
        assert_eq!(LoopProbe::parse(&f, 60), None);
        let mut other = f;
        other[0] = 0x01;
        assert_eq!(LoopProbe::parse(&other, 12), None);
    }
}
