//! Workers: the forwarding loop, and the only place where ports (`io`) meet
//! decisions (`pipeline`).
//!
//! Each worker owns a transmit handle for every port and receives on the
//! ports assigned to it. Per loop it fills one batch from its receive ports
//! (round robin), loads the current table snapshot once, runs the pipeline,
//! writes every copy straight into the egress ports' transmit rings and
//! flushes each touched port once. When nothing arrives for `idle_spin` it
//! sleeps in `poll(2)` on its receive descriptors.
//!
//! The control plane talks to a worker only through [`Shared`]: the snapshot
//! pointer, the learn queue, and a small command mailbox (attach/detach a
//! port) checked once per loop with one relaxed load.
//!
//! Routed ports are received into a second batch that goes through the
//! layer-3 stage instead of the layer-2 one (the port's role is fixed at
//! attach, so the split costs nothing per frame). Punted frames go to the
//! [`punt::PuntQueue`]; ICMP errors are built straight into the ingress
//! port's transmit ring, rate-limited per worker.
//!
//! Services (ACLs, QoS, flow accounting; `pipeline::services`) run after
//! the forwarding decision, on one key extracted per frame, only when a
//! services snapshot is published: without one the loop is unchanged.
//! Expired flows leave through a per-worker queue to the exporter.

//!
//! Owns: the worker loop and what it shares with the control plane
//! ([`Shared`], [`Mailbox`]); the punt queue ([`punt`]) and link alarms
//! ([`link_alarm`]). Must not: decide anything about a frame itself (that
//! is `pipeline`, over `tables`), allocate, lock or make a system call per
//! frame, or know about configuration.
//!
//! The worker's steps, one module each, in the order of a pass
//! (`Worker::run`): `housekeeping` (quiescent point, stop, hand-over, flow
//! aging, ring counters, commands), `rx` (receive and classify into the
//! switched and routed batches), `multicast` (snooping's frames to and
//! from the control plane, multicast routing), `l2` (the layer-2 path,
//! storm control, link-layer control frames), `l3` (the layer-3 path),
//! `services` (ACL/QoS/flow accounting after the forwarding decision) and
//! `tx` (egress queues, mirror copies, one flush per touched port);
//! `inline` takes bump-in-the-wire ports' frames out of the switched
//! batch right after `rx` (inline service control, `dpi`).
//! `worker` holds the worker's state and the loop; `shared` what the
//! control plane reads and writes.

mod housekeeping;
mod inline;
mod l2;
mod l3;
pub mod link_alarm;
pub mod mpls;
mod multicast;
pub mod punt;
mod rx;
mod rx_idle;
mod services;
mod shared;
mod tx;
mod wake_set;
mod worker;

pub use shared::*;
pub use worker::{Worker, WorkerOptions};
