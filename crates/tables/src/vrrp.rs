//! VRRP virtual routers as the data path sees them (docs/vrrp.md):
//! which VRIDs this node is master of on which router interface, and the
//! virtual addresses whose ARP requests the control plane answers.
//!
//! Written by the VRRP thread only, on a state change; read by the layer-3
//! stage (one relaxed atomic load, only for a unicast frame that is not to
//! the interface's own MAC) and by the punt thread (ARP requests). No lock
//! on the data path; the address list is read under a mutex by the punt
//! thread only, after an atomic "any configured" test.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::MAX_PORTS;

/// A virtual address on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VirtualAddress {
    /// The router interface's port id.
    pub port: u16,
    pub addr: Ipv4Addr,
    pub vrid: u8,
}

/// What an ARP request for a virtual address gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpAnswer {
    /// Not a virtual address: the kernel answers (or not) as usual.
    NotVirtual,
    /// This node is master: answer with the virtual MAC of `vrid`.
    Master(u8),
    /// A virtual address this node backs up: nobody here answers.
    Backup,
}

/// (port id, router MAC) of each interface with groups.
type RouterMacs = Arc<Vec<(u16, [u8; 6])>>;

/// The shared state (one per switch).
pub struct VirtualRouters {
    /// Per port id, 256 bits: VRIDs this node is master of.
    active: Box<[[AtomicU64; 4]]>,
    any: AtomicBool,
    addresses: Mutex<Arc<Vec<VirtualAddress>>>,
    /// (port id, router MAC) of the interfaces with groups.
    router_macs: Mutex<RouterMacs>,
}

impl Default for VirtualRouters {
    fn default() -> Self {
        VirtualRouters {
            active: (0..MAX_PORTS).map(|_| Default::default()).collect(),
            any: AtomicBool::new(false),
            addresses: Mutex::new(Arc::new(Vec::new())),
            router_macs: Mutex::new(Arc::new(Vec::new())),
        }
    }
}

impl VirtualRouters {
    /// True if this node is master of `vrid` on `port`.
    #[inline]
    pub fn is_master(&self, port: u16, vrid: u8) -> bool {
        self.active.get(port as usize).is_some_and(|w| {
            w[usize::from(vrid >> 6)].load(Ordering::Relaxed) & (1 << (vrid & 63)) != 0
        })
    }

    /// Marks `vrid` on `port` master (or not).
    pub fn set_master(&self, port: u16, vrid: u8, on: bool) {
        let Some(w) = self.active.get(port as usize) else {
            return;
        };
        let bit = 1u64 << (vrid & 63);
        let w = &w[usize::from(vrid >> 6)];
        if on {
            w.fetch_or(bit, Ordering::Release);
        } else {
            w.fetch_and(!bit, Ordering::Release);
        }
    }

    /// The configured virtual addresses (all groups, any state).
    pub fn set_addresses(&self, v: Vec<VirtualAddress>) {
        self.any.store(!v.is_empty(), Ordering::Release);
        *self.addresses.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(v);
    }

    /// The router MACs of the interfaces with groups.
    pub fn set_router_macs(&self, v: Vec<(u16, [u8; 6])>) {
        *self.router_macs.lock().unwrap_or_else(|e| e.into_inner()) = Arc::new(v);
    }

    /// A punted frame to a virtual MAC goes to the kernel addressed to the
    /// interface's router MAC (the twin's own), or the kernel would drop
    /// it as another host's. True if `frame`'s destination was rewritten.
    pub fn readdress_punt(&self, port: u16, frame: &mut [u8]) -> bool {
        if !self.any() || frame.len() < 6 || frame[0..5] != [0x00, 0x00, 0x5e, 0x00, 0x01] {
            return false;
        }
        let macs = self
            .router_macs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match macs.iter().find(|m| m.0 == port) {
            Some((_, mac)) => {
                frame[0..6].copy_from_slice(mac);
                true
            }
            None => false,
        }
    }

    /// True if any virtual address is configured.
    #[inline]
    pub fn any(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// What an ARP request for `addr` arriving on `port` gets.
    pub fn arp(&self, port: u16, addr: Ipv4Addr) -> ArpAnswer {
        if !self.any() {
            return ArpAnswer::NotVirtual;
        }
        let list = self
            .addresses
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        match list.iter().find(|a| a.port == port && a.addr == addr) {
            None => ArpAnswer::NotVirtual,
            Some(a) if self.is_master(port, a.vrid) => ArpAnswer::Master(a.vrid),
            Some(_) => ArpAnswer::Backup,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn master_bits_and_arp_answers() {
        let v = VirtualRouters::default();
        let a = Ipv4Addr::new(192, 0, 2, 254);
        assert_eq!(v.arp(3, a), ArpAnswer::NotVirtual);
        v.set_addresses(vec![VirtualAddress {
            port: 3,
            addr: a,
            vrid: 200,
        }]);
        assert_eq!(v.arp(3, a), ArpAnswer::Backup);
        assert_eq!(v.arp(4, a), ArpAnswer::NotVirtual);
        v.set_master(3, 200, true);
        assert!(v.is_master(3, 200) && !v.is_master(3, 199) && !v.is_master(2, 200));
        assert_eq!(v.arp(3, a), ArpAnswer::Master(200));
        v.set_master(3, 200, false);
        assert!(!v.is_master(3, 200));
        assert!(!v.is_master(u16::MAX, 1));
        v.set_master(u16::MAX, 1, true);
        v.set_router_macs(vec![(3, [2, 0, 0, 0, 0, 3])]);
        let mut f = [0, 0, 0x5e, 0, 1, 200, 9, 9, 9, 9, 9, 9];
        assert!(v.readdress_punt(3, &mut f));
        assert_eq!(f[0..6], [2, 0, 0, 0, 0, 3]);
        assert!(!v.readdress_punt(3, &mut f));
        let mut g = [0, 0, 0x5e, 0, 1, 200];
        assert!(!v.readdress_punt(4, &mut g));
    }
}
