//! Control: the switch as a running program.
//!
//! Owns: starting and supervising the threads ([`daemon`]: workers,
//! learner, FIB feed, punt, multicast, guard, flow export, API), the ports
//! supervisor ([`ports`]: link state, hot add/remove), hitless apply and
//! restart ([`apply`]), inline service control's engines and subscribers
//! ([`inline`]), storm control and loop detection ([`guard`]), the
//! one-switch-per-socket lock ([`instance`]) and the management API server
//! ([`api`], which reads every thread's state).
//! Must not: grow protocol, routing or rendering logic of its own; those
//! live in `protocols`, `routing`, `services` and `mgmt`, and this crate
//! wires them together. Nothing here runs per packet.

pub mod api;
pub mod apply;
pub mod daemon;
pub mod guard;
pub mod guardian;
pub mod inline;
pub mod instance;
pub mod ports;
pub mod usage_export;
