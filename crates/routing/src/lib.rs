//! The layer-3 control plane.
//!
//! Owns: the FIB manager ([`fib`], the one writer of the forwarding
//! tables), routes from FRRouting over FPM ([`frr`]), Lanyard's rtnetlink
//! mirrors of its own namespace ([`kernel`]: neighbours, addresses, static
//! routes, multicast routes), the next hops it keeps resolved as managed
//! neighbours ([`managed`]), the routed interfaces' TAP twins and the
//! punt/inject thread ([`router`]), and the sysctls they need ([`sysctl`]).
//! Must not: parse configuration text (it takes a validated
//! [`config::Config`]), render `show` output, or supervise ports; nothing
//! here runs per packet except the punt thread's bounded work.

pub mod fast_reroute;
pub mod fib;
pub mod frr;
pub mod kernel;
pub mod managed;
pub mod netns;
pub mod pseudowire;
pub mod router;
pub mod static_vpn;
pub mod sysctl;
mod tap_ready;
