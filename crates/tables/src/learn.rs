//! Learning events: workers report source addresses they saw; the control
//! plane's learner applies limits and writes the MAC table.

use crate::mac::MacKey;
use crossbeam_queue::ArrayQueue;

/// "Source `key` was seen on `port`" (new address or a move).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct LearnEvent {
    pub key: MacKey,
    pub port: u16,
}

/// Bounded lock-free queue from the workers to the learner. A full queue
/// drops the event (counted by the worker); the frame is still forwarded,
/// and the address is learned from a later frame.
pub type LearnQueue = ArrayQueue<LearnEvent>;
