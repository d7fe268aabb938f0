//! Lookup tables of the data path.
//!
//! This crate holds what the control plane compiles and the workers read:
//! the MAC address table ([`mac::MacTable`]), the port and VLAN tables of the
//! layer-2 stage ([`l2::L2Tables`]) and the learning queue between them,
//! and the FIB: IPv4 and IPv6 longest-prefix match ([`lpm4::Lpm4`],
//! [`lpm6::Lpm6`]), next hops and ECMP groups ([`nexthop::NextHopTable`])
//! and the neighbour table ([`neighbor::NeighborTable`]); the label FIB
//! ([`mpls::Lfib`]: incoming labels, label stacks per next hop,
//! pseudowires, precomputed backup paths).
//! The big fixed arrays are [`huge::HugeArray`]s (2 MB pages).
//! It knows nothing of sockets or configuration syntax, and its read paths
//! never lock or allocate.

pub mod acl;
pub mod flow;
pub mod huge;
pub mod l2;
pub mod learn;
pub mod lpm4;
pub mod lpm6;
#[cfg(test)]
mod lpm6_check;
pub mod lpm6_stride;
pub mod mac;
pub mod mcast;
pub mod mirror;
pub mod mpls;
pub mod neighbor;
pub mod nexthop;
pub mod portset;
pub mod qos;

pub use l2::{Encap, L2Tables, PortEntry, PortMode, VlanEntry, MAX_PORTS, MAX_VLANS};
pub use learn::{LearnEvent, LearnQueue};
pub use lpm4::{Lpm4, LpmError, LpmStats, MAX_NEXT_HOP};
pub use lpm6::Lpm6;
pub use lpm6_stride::Lpm6Stride;
pub use mac::{MacEntry, MacKey, MacTable, MacWriteOutcome};
pub use mpls::{IlmAction, LabelStack, Lfib, LfibError, LfibSize, Nhlfe, Pseudowire, NHLFE_BIT};
pub use neighbor::{Neighbor, NeighborState, NeighborTable};
pub use nexthop::{
    Group, NextHop, NextHopError, NextHopTable, BLACKHOLE_PORT, GROUP_BIT, MAX_GROUP_MEMBERS,
};
pub use portset::{PortSet, VlanSet};

pub mod snapshot;
pub mod vrrp;
pub use snapshot::{LearnGate, Tables};

/// Hint the CPU to bring the cache line holding `x` into L1, so that a
/// batch can overlap its cache misses (a no-op on targets other than
/// x86-64).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    #[allow(unused_unsafe)]
    // SAFETY: a prefetch is a hint; it never faults, and SSE is baseline
    // on x86-64.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(x as *const T as *const i8);
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
