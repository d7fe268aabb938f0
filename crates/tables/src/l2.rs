//! Port and VLAN tables of the layer-2 stage: what each port accepts on
//! ingress, which ports each VLAN floods to, and how each port encapsulates
//! a VLAN on egress. Built by the control plane, read-only for workers.

use crate::portset::{PortSet, VlanSet};

pub use crate::portset::MAX_PORTS;
/// VLAN ids are 12 bits.
pub const MAX_VLANS: usize = 4096;

pub const TPID_8021Q: u16 = 0x8100;
pub const TPID_8021AD: u16 = 0x88a8;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PortMode {
    /// Untagged frames in `pvid`; 802.1Q-tagged frames (VID ≠ 0) dropped.
    Access,
    /// Tagged frames (TPID `tpid`) in their VLAN if allowed; untagged in
    /// the native VLAN (`pvid`, 0 = none).
    Trunk,
    /// 802.1ad customer port: every frame, customer tags included, is
    /// carried in S-VLAN `pvid`.
    Tunnel,
}

/// How a frame leaves a port.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Encap {
    Untagged,
    Tagged { tpid: u16, vid: u16 },
}

#[derive(Clone, Debug)]
pub struct PortEntry {
    pub mode: PortMode,
    /// Access VLAN, tunnel S-VLAN, or trunk native VLAN (0 = none).
    pub pvid: u16,
    /// Outer TPID a trunk recognises and emits.
    pub tpid: u16,
    /// VLANs the port carries (trunk: allowed ∩ configured; others: pvid).
    pub vlans: VlanSet,
    pub learning: bool,
    /// Per-port learned-address limit (0 = none); enforced by the learner.
    pub mac_limit: u32,
    /// Operationally up and attached: only such ports get frames.
    pub up: bool,
    /// The layer-2 port this interface's frames enter on: itself, or the
    /// port channel it is a member of (learning, filtering and flooding
    /// see the channel, never the member).
    pub logical: u16,
    /// Frames received here are dropped and nothing is flooded here: a
    /// standby backup port, a channel member that is not collecting.
    pub blocked: bool,
    /// Where frames addressed to this port leave.
    pub egress: Egress,
    /// Spanning tree's verdict on the port (written by `protocols::ha`
    /// from the spanning tree thread's state).
    pub stp: StpState,
    /// A virtual-switch peer-link port: peer-protocol frames (EtherType
    /// 0x88b5) go to the control plane, and what arrives here is never
    /// sent to a channel in `L2Tables::peer_served`.
    pub peer_link: bool,
}

/// A port's spanning tree state as the data path applies it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum StpState {
    /// No spanning tree on this port: it forwards, BPDUs are dropped.
    #[default]
    Off,
    /// Frames dropped, nothing learned; BPDUs go to the control plane.
    Discarding,
    /// Sources learned, frames dropped.
    Learning,
    Forwarding,
}

impl StpState {
    /// The port runs spanning tree (its BPDUs go to the control plane).
    #[inline]
    pub fn on(self) -> bool {
        self != StpState::Off
    }

    /// Frames may leave and enter (off or forwarding).
    #[inline]
    pub fn forwards(self) -> bool {
        matches!(self, StpState::Off | StpState::Forwarding)
    }
}

/// `PortEntry::logical` before the tables are built: the port itself.
pub const SELF: u16 = u16::MAX;

/// Where frames addressed to a port (by the MAC table) leave. The
/// indirection is what makes failover one snapshot swap: addresses keep
/// pointing at the port they were learned on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Egress {
    /// Out of the port itself.
    Direct,
    /// Out of another port: the active member of a backup pair.
    Via(u16),
    /// Out of one member of port channel `n` (`L2Tables::channels`),
    /// chosen by a hash of the frame.
    Channel(u8),
}

/// Most members of one port channel.
pub const MAX_CHANNEL_MEMBERS: usize = 16;

/// Which header fields choose a channel member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LoadBalance {
    /// Source and destination MAC.
    L2,
    /// Source and destination IP (MACs for non-IP frames).
    L3,
    /// Addresses plus TCP/UDP ports.
    #[default]
    L3L4,
}

/// A port channel as the data path sees it.
#[derive(Clone, Copy, Debug)]
pub struct Channel {
    /// Members that distribute (carry traffic), in a stable order.
    pub members: [u16; MAX_CHANNEL_MEMBERS],
    pub active: u8,
    pub hash: LoadBalance,
}

impl Channel {
    pub const EMPTY: Channel = Channel {
        members: [0; MAX_CHANNEL_MEMBERS],
        active: 0,
        hash: LoadBalance::L3L4,
    };

    /// The member for a frame of flow hash `h`, if any member distributes.
    #[inline]
    pub fn pick(&self, h: u32) -> Option<u16> {
        match self.active {
            0 => None,
            n => Some(self.members[(h % n as u32) as usize]),
        }
    }
}

impl PortEntry {
    /// A port carrying `vlans`, learning on, no limit, up — the usual
    /// starting point for tests and benchmarks.
    pub fn new(mode: PortMode, pvid: u16, vlans: &[u16], tpid: u16) -> PortEntry {
        let mut set = VlanSet::default();
        vlans.iter().for_each(|v| set.insert(*v));
        PortEntry {
            mode,
            pvid,
            tpid,
            vlans: set,
            learning: true,
            mac_limit: 0,
            up: true,
            logical: SELF,
            blocked: false,
            egress: Egress::Direct,
            stp: StpState::Off,
            peer_link: false,
        }
    }

    /// Takes part in flooding: up, not a standby or non-collecting port,
    /// and forwarding in the spanning tree.
    #[inline]
    pub fn forwarding(&self) -> bool {
        self.up && !self.blocked && self.stp.forwards()
    }

    /// Egress encapsulation of VLAN `vid` on this port.
    #[inline]
    pub fn encap(&self, vid: u16) -> Encap {
        match self.mode {
            PortMode::Access | PortMode::Tunnel => Encap::Untagged,
            PortMode::Trunk if vid == self.pvid => Encap::Untagged,
            PortMode::Trunk => Encap::Tagged {
                tpid: self.tpid,
                vid,
            },
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct VlanEntry {
    pub configured: bool,
    pub learning: bool,
    /// Learned-address limit (0 = none); enforced by the learner.
    pub mac_limit: u32,
    /// Member ports (up or not).
    pub members: PortSet,
    /// Members that are up: the flood domain.
    pub flood: PortSet,
}

/// The layer-2 snapshot. Immutable once published.
#[derive(Clone, Debug)]
pub struct L2Tables {
    pub ports: Vec<PortEntry>,
    pub vlans: Box<[VlanEntry]>,
    /// Port channels, indexed by `Egress::Channel`.
    pub channels: Vec<Channel>,
    /// Multichassis channels (their logical ports) the virtual-switch
    /// peer serves through its own live members: frames that came over
    /// the peer link never go there (the peer delivered them already).
    pub peer_served: PortSet,
}

impl L2Tables {
    /// Tables for `ports`; VLAN membership and flood sets are derived from
    /// the ports (call after changing ports or VLAN flags).
    pub fn new(ports: Vec<PortEntry>, vlan_flags: &[(u16, bool, u32)]) -> L2Tables {
        let mut vlans = vec![VlanEntry::default(); MAX_VLANS].into_boxed_slice();
        for &(vid, learning, limit) in vlan_flags {
            let v = &mut vlans[vid as usize & 0xfff];
            v.configured = true;
            v.learning = learning;
            v.mac_limit = limit;
        }
        let mut t = L2Tables {
            ports,
            vlans,
            channels: Vec::new(),
            peer_served: PortSet::EMPTY,
        };
        t.recompute_members();
        t
    }

    /// Re-derive VLAN member and flood sets from the port entries. Channel
    /// members are not VLAN members themselves: their channel is.
    pub fn recompute_members(&mut self) {
        for v in self.vlans.iter_mut() {
            v.members = PortSet::EMPTY;
            v.flood = PortSet::EMPTY;
        }
        for (id, p) in self.ports.iter_mut().enumerate() {
            if p.logical == SELF {
                p.logical = id as u16;
            }
            if p.logical != id as u16 {
                continue;
            }
            for vid in 1..4095u16 {
                if p.vlans.contains(vid) && self.vlans[vid as usize].configured {
                    let v = &mut self.vlans[vid as usize];
                    v.members.insert(id as u16);
                    if p.forwarding() {
                        v.flood.insert(id as u16);
                    }
                }
            }
        }
    }

    /// Re-derive flood sets after `up` / `blocked` changed (membership
    /// stays).
    pub fn recompute_flood(&mut self) {
        for v in self.vlans.iter_mut() {
            let mut f = PortSet::EMPTY;
            for p in v.members.iter() {
                if self.ports.get(p as usize).is_some_and(|e| e.forwarding()) {
                    f.insert(p);
                }
            }
            v.flood = f;
        }
    }

    /// Mark a port up or down (a new snapshot is built from a clone).
    pub fn set_port_up(&mut self, port: u16, up: bool) {
        if let Some(p) = self.ports.get_mut(port as usize) {
            p.up = up;
        }
        let fwd = self
            .ports
            .get(port as usize)
            .is_some_and(|p| p.forwarding());
        for v in self.vlans.iter_mut() {
            if v.members.contains(port) {
                if fwd {
                    v.flood.insert(port);
                } else {
                    v.flood.remove(port);
                }
            }
        }
    }

    /// The layer-2 port a frame received on interface `port` enters on.
    #[inline]
    pub fn logical(&self, port: u16) -> u16 {
        self.ports.get(port as usize).map_or(port, |p| p.logical)
    }

    /// The port a frame for `port` (as the MAC table says) leaves by,
    /// before channel member selection: a backup pair's active member.
    #[inline]
    pub fn redirect(&self, port: u16) -> u16 {
        match self.ports.get(port as usize).map(|p| p.egress) {
            Some(Egress::Via(to)) => to,
            _ => port,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(mode: PortMode, pvid: u16, vlans: &[u16]) -> PortEntry {
        PortEntry::new(mode, pvid, vlans, TPID_8021Q)
    }

    #[test]
    fn membership_and_flood_sets() {
        let mut t = L2Tables::new(
            vec![
                port(PortMode::Access, 10, &[10]),
                port(PortMode::Access, 20, &[20]),
                port(PortMode::Trunk, 1, &[1, 10, 20, 30]),
            ],
            &[(1, true, 0), (10, true, 0), (20, true, 0)],
        );
        assert_eq!(t.vlans[10].members.iter().collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(t.vlans[20].members.iter().collect::<Vec<_>>(), vec![1, 2]);
        // VLAN 30 is allowed on the trunk but not configured: no members.
        assert!(t.vlans[30].members.is_empty());
        t.set_port_up(2, false);
        assert_eq!(t.vlans[10].flood.iter().collect::<Vec<_>>(), vec![0]);
        assert_eq!(t.vlans[10].members.len(), 2);
    }

    #[test]
    fn trunk_encap() {
        let p = port(PortMode::Trunk, 1, &[1, 10]);
        assert_eq!(p.encap(1), Encap::Untagged);
        assert_eq!(
            p.encap(10),
            Encap::Tagged {
                tpid: 0x8100,
                vid: 10
            }
        );
        assert_eq!(
            port(PortMode::Tunnel, 500, &[500]).encap(500),
            Encap::Untagged
        );
    }
}
