//! Counters. Every drop has a reason and a counter; every worker owns its
//! counter block and is its only writer, so increments are plain
//! load-add-store on relaxed atomics (no locked instruction); readers sum
//! the blocks of all workers.

pub use crate::counter::Counter;
use tables::{MAX_PORTS, MAX_VLANS};

/// Storm-control classes (`storm::StormClass`: broadcast, multicast,
/// unknown unicast).
pub const STORM_CLASSES: usize = 3;

/// Why a frame was dropped. The names are those of `show counters`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[repr(u8)]
pub enum DropReason {
    /// Shorter than an Ethernet header, or a tag cut short.
    Malformed = 0,
    /// Longer than the 9,216-byte jumbo limit.
    Oversize,
    /// Source address is multicast/broadcast (never valid as a source).
    InvalidSource,
    /// The frame's VLAN is not configured on the switch.
    UnknownVlan,
    /// Tagged with a VLAN the trunk does not allow.
    VlanNotAllowed,
    /// 802.1Q-tagged frame (VID ≠ 0) on an access port.
    TaggedOnAccess,
    /// Untagged frame on a trunk without a native VLAN.
    UntaggedNotAllowed,
    /// Destination is on the port the frame came from (filtered).
    SamePort,
    /// The egress port is down or detached.
    PortDown,
    /// The egress port's transmit ring was full.
    TxRingFull,
    /// The ingress port's receive ring was full: the kernel dropped the
    /// frame before Lanyard saw it (read from the socket's statistics).
    RxRingFull,
    /// The kernel refused or discarded a frame handed to it for transmit
    /// (link went down with frames queued, length over the MTU).
    TxError,
    /// Denied by an access list (in or out).
    AclDeny,
    /// Dropped by a QoS policer.
    Policed,
    /// Tail drop of a full egress class queue.
    QueueFull,
    /// Received on a port that does not forward: a standby backup port, a
    /// port-channel member that is not collecting, a port spanning tree
    /// holds discarding or learning.
    Blocked,
    /// A link-local control frame (01:80:c2:00:00:0x) no bridge forwards,
    /// and no protocol of Lanyard's takes on this port.
    L2Control,
    /// Over the port's storm-control limit for broadcast, multicast or
    /// unknown-unicast frames.
    StormControl,
    /// Arrived over a virtual-switch peer link for a multichassis channel
    /// the peer already delivered to (MC-LAG split horizon).
    PeerServed,
}

pub const DROP_REASONS: usize = 19;

impl DropReason {
    pub const ALL: [DropReason; DROP_REASONS] = [
        DropReason::Malformed,
        DropReason::Oversize,
        DropReason::InvalidSource,
        DropReason::UnknownVlan,
        DropReason::VlanNotAllowed,
        DropReason::TaggedOnAccess,
        DropReason::UntaggedNotAllowed,
        DropReason::SamePort,
        DropReason::PortDown,
        DropReason::TxRingFull,
        DropReason::RxRingFull,
        DropReason::TxError,
        DropReason::AclDeny,
        DropReason::Policed,
        DropReason::QueueFull,
        DropReason::Blocked,
        DropReason::L2Control,
        DropReason::StormControl,
        DropReason::PeerServed,
    ];

    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Oversize => "oversize",
            DropReason::InvalidSource => "invalid-source",
            DropReason::UnknownVlan => "unknown-vlan",
            DropReason::VlanNotAllowed => "vlan-not-allowed",
            DropReason::TaggedOnAccess => "tagged-on-access",
            DropReason::UntaggedNotAllowed => "untagged-not-allowed",
            DropReason::SamePort => "same-port",
            DropReason::PortDown => "port-down",
            DropReason::TxRingFull => "tx-ring-full",
            DropReason::RxRingFull => "rx-ring-full",
            DropReason::TxError => "tx-error",
            DropReason::AclDeny => "acl-deny",
            DropReason::Policed => "policed",
            DropReason::QueueFull => "queue-full",
            DropReason::Blocked => "blocked",
            DropReason::L2Control => "l2-control",
            DropReason::StormControl => "storm-control",
            DropReason::PeerServed => "peer-served",
        }
    }
}

#[derive(Default, Debug)]
pub struct PortCounters {
    pub rx_frames: Counter,
    pub rx_bytes: Counter,
    pub tx_frames: Counter,
    pub tx_bytes: Counter,
    /// Frames received here that were flooded (broadcast, multicast, unknown).
    pub rx_flooded: Counter,
    /// Copies sent out of this port by flooding.
    pub tx_flooded: Counter,
    /// Of `rx_frames`/`tx_frames`: frames to a group address other than
    /// broadcast, and to broadcast (IF-MIB counts unicast, multicast and
    /// broadcast apart; unicast is the rest).
    pub rx_multicast: Counter,
    pub rx_broadcast: Counter,
    pub tx_multicast: Counter,
    pub tx_broadcast: Counter,
    /// Drops charged to this port (ingress reasons, or egress reasons for
    /// frames that were to leave here).
    pub drops: [Counter; DROP_REASONS],
    /// Storm-control drops per `storm::StormClass`.
    pub storm_drops: [Counter; STORM_CLASSES],
    /// This switch's own loop-detect probes received here.
    pub loop_probes: Counter,
    /// TCP/UDP checksums completed on receive for a sender that left them
    /// to offload (veth ports: `io::complete_checksums`).
    pub rx_csum_completed: Counter,
    /// Frames sent by moving a shared-UMEM descriptor (no copy).
    pub umem_moved: Counter,
    /// A gauge: the port's shared-UMEM receive chunks away from its rings.
    pub umem_away: Counter,
}

#[derive(Default, Debug)]
pub struct VlanCounters {
    pub rx_frames: Counter,
    pub rx_bytes: Counter,
    pub tx_frames: Counter,
    pub tx_bytes: Counter,
    pub flooded: Counter,
    pub drops: [Counter; DROP_REASONS],
}

/// What a frame's destination address is: RFC 2863 counts frames to
/// each kind apart (`ifHCInMulticastPkts`, …).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Dest {
    Unicast,
    Multicast,
    Broadcast,
}

impl Dest {
    /// From the frame's first bytes (a frame shorter than an address
    /// counts as unicast: it is dropped as malformed anyway).
    #[inline]
    pub fn of(frame: &[u8]) -> Dest {
        match frame.get(..6) {
            Some(d) if d[0] & 1 != 0 => {
                if d == [0xff; 6] {
                    Dest::Broadcast
                } else {
                    Dest::Multicast
                }
            }
            _ => Dest::Unicast,
        }
    }
}

/// Frames, multicast and broadcast frames, and bytes sent in a burst
/// (a drain of the class queues, a moved TX ring): counted once at its end.
#[derive(Clone, Copy, Default, Debug)]
pub struct TxTally {
    pub frames: u64,
    pub multicast: u64,
    pub broadcast: u64,
    pub bytes: u64,
}

impl TxTally {
    #[inline]
    pub fn add(&mut self, dest: Dest, len: usize) {
        self.frames += 1;
        self.bytes += len as u64;
        match dest {
            Dest::Unicast => {}
            Dest::Multicast => self.multicast += 1,
            Dest::Broadcast => self.broadcast += 1,
        }
    }
}

impl PortCounters {
    /// A frame received on this port.
    #[inline]
    pub fn count_rx(&self, frame: &[u8]) {
        self.rx_frames.add(1);
        self.rx_bytes.add(frame.len() as u64);
        match Dest::of(frame) {
            Dest::Unicast => {}
            Dest::Multicast => self.rx_multicast.add(1),
            Dest::Broadcast => self.rx_broadcast.add(1),
        }
    }

    /// A frame of `len` bytes sent out of this port to `dest`.
    #[inline]
    pub fn count_tx(&self, dest: Dest, len: usize) {
        self.tx_frames.add(1);
        self.tx_bytes.add(len as u64);
        match dest {
            Dest::Unicast => {}
            Dest::Multicast => self.tx_multicast.add(1),
            Dest::Broadcast => self.tx_broadcast.add(1),
        }
    }

    /// A burst of sent frames.
    #[inline]
    pub fn count_tx_tally(&self, t: &TxTally) {
        if t.frames == 0 {
            return;
        }
        self.tx_frames.add(t.frames);
        self.tx_bytes.add(t.bytes);
        self.tx_multicast.add(t.multicast);
        self.tx_broadcast.add(t.broadcast);
    }
}

/// One worker's counters.
pub struct WorkerCounters {
    pub ports: Box<[PortCounters]>,
    pub vlans: Box<[VlanCounters]>,
    /// Learning events lost because the learn queue was full.
    pub learn_queue_full: Counter,
    /// Batches processed (to derive the average batch size).
    pub batches: Counter,
    /// Idle receive rings parked on their descriptors, and woken again
    /// (parked now = parks - wakes; `datapath` `rx_idle`).
    pub ring_parks: Counter,
    pub ring_wakes: Counter,
    /// The layer-3 stage (routed ports).
    pub l3: crate::l3::L3Counters,
    /// Control-plane policing, per class.
    pub copp: crate::copp::CoppCounters,
    /// Packets and bytes per multicast route (`McRoute::index`).
    pub mroutes: RouteCounters,
    /// Multicast frames: replicated copies sent, IGMP/MLD messages seen.
    pub mcast: McastCounters,
}

/// Packet and byte counters per multicast route, indexed by the route's
/// stable counter slot.
pub struct RouteCounters {
    cells: Box<[Counter]>,
}

impl RouteCounters {
    pub fn new(routes: usize) -> RouteCounters {
        RouteCounters {
            cells: (0..routes * 2).map(|_| Counter::default()).collect(),
        }
    }

    #[inline]
    pub fn add(&self, index: u32, bytes: u64) {
        let i = index as usize * 2;
        if let (Some(p), Some(b)) = (self.cells.get(i), self.cells.get(i + 1)) {
            p.add(1);
            b.add(bytes);
        }
    }

    /// (packets, bytes) of one slot.
    pub fn get(&self, index: u32) -> (u64, u64) {
        let i = index as usize * 2;
        match (self.cells.get(i), self.cells.get(i + 1)) {
            (Some(p), Some(b)) => (p.get(), b.get()),
            _ => (0, 0),
        }
    }
}

#[derive(Default, Debug)]
pub struct McastCounters {
    /// Frames of a registered group (a route matched).
    pub registered: Counter,
    /// Frames of an unregistered group (to router ports, or flooded).
    pub unregistered: Counter,
    /// Copies of multicast frames sent by replication.
    pub replicated: Counter,
    /// IGMP/MLD messages handed to the snooping thread.
    pub snooped: Counter,
    /// IGMP/MLD messages lost because the snooping queue was full.
    pub snoop_queue_full: Counter,
    /// Routed multicast dropped: arrived on another port than the route's
    /// incoming one (RPF failure).
    pub rpf_fail: Counter,
    /// Routed multicast dropped: TTL at or below the threshold.
    pub ttl_threshold: Counter,
}

impl Default for WorkerCounters {
    fn default() -> Self {
        WorkerCounters {
            ports: (0..MAX_PORTS).map(|_| PortCounters::default()).collect(),
            vlans: (0..MAX_VLANS).map(|_| VlanCounters::default()).collect(),
            learn_queue_full: Counter::default(),
            batches: Counter::default(),
            ring_parks: Counter::default(),
            ring_wakes: Counter::default(),
            l3: crate::l3::L3Counters::default(),
            copp: crate::copp::CoppCounters::default(),
            mroutes: RouteCounters::new(tables::mcast::MAX_MROUTES),
            mcast: McastCounters::default(),
        }
    }
}

impl WorkerCounters {
    #[inline]
    pub fn drop_in(&self, port: u16, vlan: Option<u16>, r: DropReason) {
        if let Some(p) = self.ports.get(port as usize) {
            p.drops[r as usize].add(1);
        }
        if let Some(v) = vlan {
            self.vlans[v as usize & 0xfff].drops[r as usize].add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_counted_by_their_destinations_kind() {
        let c = PortCounters::default();
        c.count_rx(&[0xff; 60]);
        c.count_rx(&[0x01, 0x00, 0x5e, 0, 0, 1, 0, 0]);
        c.count_rx(&[0x33, 0x33, 0, 0, 0, 1]);
        c.count_rx(&[0x02, 0, 0, 0, 0, 1, 0]);
        // Too short for an address: unicast (it is dropped as malformed).
        c.count_rx(&[0xff]);
        assert_eq!(c.rx_frames.get(), 5);
        assert_eq!(c.rx_bytes.get(), 60 + 8 + 6 + 7 + 1);
        assert_eq!((c.rx_multicast.get(), c.rx_broadcast.get()), (2, 1));
        // ff:ff:ff:ff:ff:fe is a group address, not broadcast.
        assert_eq!(
            Dest::of(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xfe]),
            Dest::Multicast
        );

        let mut t = TxTally::default();
        t.add(Dest::Broadcast, 64);
        t.add(Dest::Unicast, 100);
        t.add(Dest::Multicast, 70);
        c.count_tx_tally(&t);
        c.count_tx(Dest::Multicast, 10);
        assert_eq!(c.tx_frames.get(), 4);
        assert_eq!(c.tx_bytes.get(), 244);
        assert_eq!((c.tx_multicast.get(), c.tx_broadcast.get()), (2, 1));
    }
}
