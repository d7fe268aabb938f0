//! Inline service control (the "DPI" engine): which subscriber a flow
//! belongs to, which application it carries, and what that costs.
//!
//! Owns: the bidirectional flow table ([`flow`]), the subscriber table and
//! its lock-free snapshots ([`subscriber`]), the bulk provisioning format
//! ([`provision`]), the thin nDPI binding ([`ndpi`]), operator signatures
//! ([`signature`]), services and their counters ([`service`]) and the
//! per-worker engine that joins them ([`engine`]) and the plan the
//! control plane publishes for inline mode ([`inline`]).
//! Must not: open sockets, read configuration text, or allocate, lock or
//! make a system call per packet once an [`engine::Engine`] is built.
//! Everything here takes time as an argument (milliseconds of the caller's
//! clock), so tests run on simulated time.
//!
//! Module imports flow one way: `huge` (huge-page arrays for the big
//! tables: `tables::huge`, re-exported) is a leaf; `packet`, `flow` (uses `huge`), `subscriber`, `ndpi`
//! and `counter` are leaves otherwise; `bucket` (the token bucket) uses `counter`;
//! `provision` and `quota_state` (the quota state file) use
//! `subscriber`; `signature` uses `packet`; `service`
//! uses `ndpi`'s protocol ids, `counter` and `bucket`; `bandwidth`
//! (controllers, the control thread's sharing) uses `service` and
//! `bucket`; `engine` uses them all; `inline` (what the control plane
//! publishes to the workers) uses `engine`.

pub mod bandwidth;
pub mod bucket;
pub mod counter;
pub mod engine;
pub mod first_packet;
pub mod flow;
pub use tables::huge;
pub mod inline;
pub mod ndpi;
pub mod packet;
pub mod provision;
pub mod quota_state;
pub mod report;
pub mod service;
pub mod signature;
pub mod subscriber;
pub mod usage_record;
