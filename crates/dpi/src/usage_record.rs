//! Usage records: one ended flow (or a slice of a long one) as the usage exporter needs it
//! (docs/inline.md, "Usage records"). A worker's engine pushes one into its
//! queue when a flow leaves the table; the exporter thread turns each into
//! two IPFIX records (upstream, downstream) with the application, service
//! and subscriber names. A full queue loses the record and counts it
//! (`export-lost`): the worker never waits for the exporter.

use crossbeam_queue::ArrayQueue;
use std::sync::atomic::AtomicU64;

/// Why a flow ended (IANA flowEndReason values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EndReason {
    /// Idle past its state's timeout.
    Idle = 1,
    /// Still live after the active timeout: an interim record of the
    /// flow's traffic since its previous record.
    ActiveTimeout = 2,
    /// TCP FIN from both ends or RST.
    EndOfFlow = 3,
    /// Removed by a configuration change, restart or `clear`.
    Forced = 4,
    /// Removed to make room in a full table.
    LackOfResources = 5,
}

/// One ended flow, oriented subscriber ↔ network.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UsageRecord {
    /// The subscriber-side end (address, port) and the network-side end.
    pub subscriber_addr: u128,
    pub network_addr: u128,
    pub subscriber_port: u16,
    pub network_port: u16,
    pub proto: u8,
    pub v6: bool,
    /// Application and service ids of the engine's policy.
    pub app: u16,
    pub service: u16,
    /// Subscriber slot and generation (`flow::NONE` slot: none).
    pub sub: u32,
    pub sub_gen: u16,
    /// [upstream, downstream].
    pub packets: [u64; 2],
    pub bytes: [u64; 2],
    /// First and last packet, the engine's milliseconds.
    pub first_ms: u64,
    pub last_ms: u64,
    pub end: EndReason,
}

/// A worker's queue of usage records (single producer: the worker).
pub type UsageQueue = ArrayQueue<UsageRecord>;

/// What the usage exporter (`control::usage_export`) did, for
/// `show service-control`.
#[derive(Default)]
pub struct UsageExportCounters {
    /// Usage records taken from the queues (flows).
    pub flows: AtomicU64,
    /// IPFIX data records sent (one per direction with traffic).
    pub records: AtomicU64,
    pub messages: AtomicU64,
    pub send_errors: AtomicU64,
}
