//! Port and VLAN tables of the layer-2 stage: what each port accepts on
//! ingress, which ports each VLAN floods to, and how each port encapsulates
//! a VLAN on egress. Built by the control plane, read-only for workers.

use crate::portset::{PortSet, VlanSet};

/// Most ports one switch has (port ids are `0..MAX_PORTS`).
pub const MAX_PORTS: usize = 256;
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
        }
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
        let mut t = L2Tables { ports, vlans };
        t.recompute_members();
        t
    }

    /// Re-derive VLAN member and flood sets from the port entries.
    pub fn recompute_members(&mut self) {
        for v in self.vlans.iter_mut() {
            v.members = PortSet::EMPTY;
            v.flood = PortSet::EMPTY;
        }
        for (id, p) in self.ports.iter().enumerate() {
            for vid in 1..4095u16 {
                if p.vlans.contains(vid) && self.vlans[vid as usize].configured {
                    let v = &mut self.vlans[vid as usize];
                    v.members.insert(id as u16);
                    if p.up {
                        v.flood.insert(id as u16);
                    }
                }
            }
        }
    }

    /// Mark a port up or down (a new snapshot is built from a clone).
    pub fn set_port_up(&mut self, port: u16, up: bool) {
        if let Some(p) = self.ports.get_mut(port as usize) {
            p.up = up;
        }
        for v in self.vlans.iter_mut() {
            if v.members.contains(port) {
                if up {
                    v.flood.insert(port);
                } else {
                    v.flood.remove(port);
                }
            }
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
