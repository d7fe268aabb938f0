//! Layer-2 protocol state machines and the MAC learner.
//!
//! Owns: LACP ([`lacp`], pure: frames in, frames and decisions out),
//! backup pairs and port channels ([`ha`]: the pure [`ha::HaState`] and the
//! thread-safe [`ha::Ha`] around it), IGMP/MLD snooping and multicast
//! routes ([`mcast`]), and MAC learning, limits and aging ([`learn`], the
//! MAC table's only writer), Rapid Spanning Tree ([`stp`], pure, and the
//! thread that runs it, [`spanning_tree`]), VRRPv3 first-hop redundancy
//! ([`vrrp`]: the pure `vrrp::machine` and the `vrrp` thread).
//! Must not: open ports, supervise links or serve the API; each state
//! machine is driven by its caller's clock and events so it can be tested
//! without sockets. (The kernel's multicast routes come in through
//! `routing::kernel::mfc`.)

pub mod ha;
pub mod lacp;
pub mod learn;
pub mod mcast;
pub mod spanning_tree;
pub mod stp;
pub mod vrrp;
pub mod vswitch;
