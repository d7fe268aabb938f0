//! Logging: every crate logs through `tracing` (`tracing::info!`,
//! `tracing::warn!`, …) with its module path as the target
//! (`control::ports`, `routing::router`, `protocols::ha`, …); this crate
//! installs the one subscriber that decides what is written where.
//!
//! Owns: the filter (`RUST_LOG` syntax: `info`, `routing=debug,control::ports=warn`;
//! the `RUST_LOG` variable wins over the configured one), the stderr
//! output (one line per event: time, level, target, message and fields)
//! and the RFC 5424 syslog output ([`syslog`]: UDP to a collector and/or
//! the local `/dev/log` socket).
//! Must not: depend on any other Lanyard crate or decide what is logged;
//! a log write never blocks a thread for long (datagram sockets,
//! non-blocking; a lost syslog datagram is counted, not retried).

pub mod syslog;
pub mod tap;

use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

pub use syslog::{Facility, SyslogLayer, SyslogSettings};

/// The default filter: every subsystem at `info`.
pub const DEFAULT_FILTER: &str = "info";

/// What to log and where.
#[derive(Clone, Debug, Default)]
pub struct LogSettings {
    /// `RUST_LOG`-style directives; empty for [`DEFAULT_FILTER`].
    pub filter: String,
    /// Also send every event that passes the filter to syslog.
    pub syslog: Option<SyslogSettings>,
}

/// Checks `RUST_LOG`-style directives (for configuration validation).
pub fn check_filter(directives: &str) -> Result<(), String> {
    EnvFilter::builder()
        .parse(directives)
        .map(|_| ())
        .map_err(|e| format!("bad log filter {directives:?}: {e}"))
}

static INSTALLED: OnceLock<()> = OnceLock::new();

/// Installs the process's subscriber (the first call wins; later calls
/// return `Ok(false)`). `RUST_LOG`, when set and valid, replaces
/// `settings.filter`.
pub fn init(settings: &LogSettings) -> Result<bool, String> {
    if INSTALLED.get().is_some() {
        return Ok(false);
    }
    let directives = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() && check_filter(&v).is_ok() => v,
        _ if settings.filter.trim().is_empty() => DEFAULT_FILTER.to_string(),
        _ => settings.filter.clone(),
    };
    let filter = EnvFilter::builder()
        .parse(&directives)
        .map_err(|e| format!("bad log filter {directives:?}: {e}"))?;
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true);
    let syslog = match &settings.syslog {
        Some(s) => Some(SyslogLayer::new(s)?),
        None => None,
    };
    let installed = tracing_subscriber::registry()
        .with(
            stderr
                .and_then(syslog)
                .and_then(tap::TapLayer)
                .with_filter(filter),
        )
        .try_init()
        .is_ok();
    let _ = INSTALLED.set(());
    Ok(installed)
}
