//! Prometheus metrics: `GET /metrics` on the address in
//! `management.metrics.listen` (off by default).
//!
//! Owns: turning the management API's `show` answers into the
//! OpenMetrics text format ([`collect`]), and the small HTTP server that
//! serves it ([`serve`]).
//! Must not: read the switch's state any other way. Every value comes from
//! the same API request the matching `show` command renders, so a scrape
//! and `show` never disagree. The exposition format is written by the
//! Prometheus project's own Rust crate (`prometheus-client`), not by hand
//! (docs/dependencies.md).

mod collect;
mod http;

pub use collect::collect;
pub use http::{serve, MetricsServer};

/// Answers one API request (`{"cmd":"show-counters"}`) with the API's
/// envelope (`{"ok":true,"data":...}` or `{"ok":false,"error":...}`).
pub type Query = dyn Fn(&serde_json::Value) -> serde_json::Value + Send + Sync;

/// The `Content-Type` of a scrape answer.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
