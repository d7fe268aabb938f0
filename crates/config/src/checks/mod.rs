//! Checks of each section that need the whole configuration (cross
//! references between sections); called by `validate`. The sections
//! themselves only define their schema, so the model can hold them
//! without a cycle.

pub(crate) mod copp;
pub(crate) mod events;
pub(crate) mod guard;
pub(crate) mod ha;
pub(crate) mod l2vpn;
pub(crate) mod mirror;
pub(crate) mod mpls;
pub(crate) mod multicast;
pub(crate) mod service_control;
pub(crate) mod services;
pub(crate) mod stp;
pub(crate) mod vrf;
pub(crate) mod vswitch;
