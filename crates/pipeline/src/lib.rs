//! The forwarding pipeline: pure per-batch decisions.
//!
//! [`l2::process`] takes a batch of received frames and the current table
//! snapshot, and fills one [`Verdict`] per frame: drop (with a reason),
//! unicast to a port, or flood in a VLAN. Learning leaves as events on a
//! queue; time comes in as an argument. No system calls, no locks, no
//! allocation: the caller (the `datapath` worker) does the I/O, using
//! [`egress::write`] to encapsulate each copy for its egress port.

pub mod channel;
pub mod copp;
pub mod counter;
pub mod counters;
pub mod egress;
pub mod l2;
pub mod l3;
pub mod mcast;
pub mod mpls;
pub mod qos;
pub mod services;
pub mod storm;

pub use counters::{DropReason, PortCounters, VlanCounters, WorkerCounters};
pub use l2::{process, Action, Verdict, Verdicts};
