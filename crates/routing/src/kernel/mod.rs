//! Lanyard and the kernel of its own network namespace, over rtnetlink
//! (`NETLINK_ROUTE`), with nothing but `libc`.
//!
//! # What is mirrored, and why
//! Lanyard's routed interfaces have a TAP twin in the kernel (the punt and
//! inject path). The kernel does ARP and IPv6 neighbour discovery on those
//! TAPs: it queues packets while an address is being resolved, retries,
//! runs the NUD state machine (reachable → stale → delay → probe, or
//! failed), answers requests for the TAP's addresses and announces them
//! (gratuitous ARP with `arp_notify`). Lanyard does not re-implement any of
//! that; it copies the results. [`neigh::NeighborMonitor`] dumps the
//! kernel's neighbour table and follows its changes, and the caller keeps
//! the entries of its TAPs' ifindexes in its forwarding neighbour table.
//!
//! An entry is usable ([`neigh::NeighborEvent::usable`]) when it has a MAC
//! address and is in one of `NUD_REACHABLE`, `NUD_STALE`, `NUD_DELAY`,
//! `NUD_PROBE`, `NUD_PERMANENT` or `NUD_NOARP` (the kernel's `NUD_VALID`:
//! the states in which the kernel itself transmits to the address).
//! `NUD_INCOMPLETE` (resolving), `NUD_FAILED` (no answer) and `NUD_NONE`
//! are not; neither is a deleted entry. Traffic to an unusable neighbour
//! is punted to the kernel, which resolves it and thereby produces the
//! event that makes it usable.
//!
//! What the kernel sends (seen on 6.x, see `tests/kernel_rtnl.rs`):
//! resolving a neighbour produces no notification for `NUD_INCOMPLETE`,
//! only one when the answer arrives (`NUD_REACHABLE` with the MAC); `ip
//! neigh del` produces `NUD_FAILED` (no MAC) and then `RTM_DELNEIGH`. Bridge
//! FDB entries share the neighbour group and are ignored by the decoder.
//!
//! The other direction, [`rtnl::Rtnl`], puts Lanyard's configuration into
//! the kernel: the addresses of its routed interfaces on their TAPs (so the
//! kernel answers ARP/ND for them and sources its own packets from them)
//! and the configured static routes.
//!
//! Sockets belong to the network namespace of the thread that opens them.

pub mod mfc;
pub mod neigh;
mod nl;
pub mod rtnl;

pub use neigh::{decode_all, decode_neigh, is_overrun, NeighborEvent, NeighborMonitor};
pub use rtnl::{is_exists, Rtnl};
