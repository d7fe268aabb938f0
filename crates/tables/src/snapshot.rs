//! The snapshot the workers read: everything a forwarding decision needs,
//! published by the control plane as one immutable value.

use crate::l2::{L2Tables, MAX_PORTS, MAX_VLANS};
use crate::mac::MacTable;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Flags the learner raises when a VLAN or port has reached its learning
/// limit, so workers stop queueing events for new addresses there (moves of
/// known addresses still go through).
pub struct LearnGate {
    vlan_full: Box<[AtomicBool]>,
    port_full: Box<[AtomicBool]>,
}

impl Default for LearnGate {
    fn default() -> Self {
        LearnGate::new(MAX_PORTS)
    }
}

impl LearnGate {
    /// Flags for port ids `0..ports` (a port beyond is never full).
    pub fn new(ports: usize) -> LearnGate {
        LearnGate {
            vlan_full: (0..MAX_VLANS).map(|_| AtomicBool::new(false)).collect(),
            port_full: (0..ports.min(MAX_PORTS))
                .map(|_| AtomicBool::new(false))
                .collect(),
        }
    }

    #[inline]
    pub fn is_full(&self, vlan: u16, port: u16) -> bool {
        self.vlan_full[vlan as usize & 0xfff].load(Ordering::Relaxed)
            || self
                .port_full
                .get(port as usize)
                .is_some_and(|f| f.load(Ordering::Relaxed))
    }

    pub fn set_vlan_full(&self, vlan: u16, full: bool) {
        self.vlan_full[vlan as usize & 0xfff].store(full, Ordering::Relaxed);
    }

    pub fn set_port_full(&self, port: u16, full: bool) {
        if let Some(f) = self.port_full.get(port as usize) {
            f.store(full, Ordering::Relaxed);
        }
    }
}

/// One published version of all tables.
pub struct Tables {
    pub l2: L2Tables,
    pub mac: Arc<MacTable>,
    pub learn_gate: Arc<LearnGate>,
}
