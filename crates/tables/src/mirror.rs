//! Port mirroring (SPAN): where copies of received and sent frames go.
//! Built by the control plane from its sessions, read by the workers.

use crate::portset::PortSet;
use crate::{MAX_PORTS, MAX_VLANS};

/// Destinations of copies, by source port and VLAN and direction.
pub struct MirrorTable {
    /// Per port: destinations of frames received on it.
    pub rx_port: Box<[PortSet]>,
    /// Per port: destinations of frames sent on it.
    pub tx_port: Box<[PortSet]>,
    /// Per VLAN: destinations of frames received in it.
    pub rx_vlan: Box<[PortSet]>,
    /// Per VLAN: destinations of frames sent in it.
    pub tx_vlan: Box<[PortSet]>,
    /// Every destination (monitor) port.
    pub monitors: PortSet,
}

impl MirrorTable {
    /// No sessions, for port ids `0..ports` (sized by the configuration:
    /// a port id beyond mirrors nothing).
    pub fn new(ports: usize) -> MirrorTable {
        let ports = ports.min(MAX_PORTS);
        MirrorTable {
            rx_port: vec![PortSet::EMPTY; ports].into(),
            tx_port: vec![PortSet::EMPTY; ports].into(),
            rx_vlan: vec![PortSet::EMPTY; MAX_VLANS].into(),
            tx_vlan: vec![PortSet::EMPTY; MAX_VLANS].into(),
            monitors: PortSet::EMPTY,
        }
    }

    /// Destinations of a frame received on `port` in `vlan` (0: none).
    #[inline]
    pub fn rx(&self, port: u16, vlan: u16) -> PortSet {
        let mut s = self.rx_port.get(port as usize).copied().unwrap_or_default();
        if vlan != 0 {
            s = s.union(&self.rx_vlan[vlan as usize % MAX_VLANS]);
        }
        s
    }

    /// Destinations of a frame sent on `port` in `vlan` (0: none).
    #[inline]
    pub fn tx(&self, port: u16, vlan: u16) -> PortSet {
        let mut s = self.tx_port.get(port as usize).copied().unwrap_or_default();
        if vlan != 0 {
            s = s.union(&self.tx_vlan[vlan as usize % MAX_VLANS]);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_port_and_vlan_sessions() {
        let mut t = MirrorTable::new(4);
        t.rx_port[1].insert(7);
        t.rx_vlan[10].insert(8);
        t.tx_port[2].insert(9);
        assert_eq!(t.rx(1, 10).iter().collect::<Vec<_>>(), vec![7, 8]);
        assert_eq!(t.rx(1, 0).iter().collect::<Vec<_>>(), vec![7]);
        assert_eq!(t.rx(3, 10).iter().collect::<Vec<_>>(), vec![8]);
        assert!(t.tx(1, 10).is_empty());
        assert_eq!(t.tx(2, 5).iter().collect::<Vec<_>>(), vec![9]);
        // A port id beyond the configured ports mirrors nothing.
        assert_eq!(t.rx(900, 10).iter().collect::<Vec<_>>(), vec![8]);
        assert!(t.tx(u16::MAX, 0).is_empty());
    }
}
