//! The control plane: configuration, table building, learning and aging,
//! port supervision and the management API. Nothing here runs per packet;
//! it builds what the workers read and reads what they count.

pub mod api;
pub mod apply;
pub mod build;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod fib;
pub mod flowexport;
pub mod frr;
pub mod guard;
pub mod ha;
pub mod instance;
pub mod kernel;
pub mod lacp;
pub mod learn;
pub mod mcast;
pub mod ports;
pub mod router;
pub mod services;
pub mod show;
pub mod sysctl;

/// `aa:bb:cc:dd:ee:ff`.
pub fn show_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}
