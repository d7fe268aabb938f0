//! The control plane: configuration, table building, learning and aging,
//! port supervision and the management API. Nothing here runs per packet;
//! it builds what the workers read and reads what they count.

pub mod api;
pub mod build;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod fib;
pub mod frr;
pub mod kernel;
pub mod learn;
pub mod ports;
pub mod router;
pub mod show;
pub mod sysctl;
