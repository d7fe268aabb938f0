//! Services: access lists, QoS policies and flow export.
//!
//! Owns: the compiler from the configuration's services sections to the
//! snapshot the workers read ([`compile`], re-exported here), their `show`
//! JSON, and the flow exporter thread that turns the workers' expired flow
//! records into NetFlow v9 or IPFIX datagrams ([`export`]).
//! Must not: classify packets (that is `pipeline::services`, per packet in
//! the workers) or parse configuration text. Inline services still to come
//! (DPI) belong here beside them.

pub mod compile;
pub mod export;

pub use compile::*;
