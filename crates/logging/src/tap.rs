//! The last log lines, kept in memory for the event manager's log-pattern
//! events (`event-manager` policies `on: {log: REGEX}`): a bounded ring
//! with a sequence number, so a reader asks for what is new since it last
//! looked. Lines past the ring's size are lost to a slow reader (counted).

use std::collections::VecDeque;
use std::sync::Mutex;
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Lines the ring keeps.
pub const CAPACITY: usize = 1024;

/// One log line.
#[derive(Clone, Debug)]
pub struct Line {
    pub seq: u64,
    pub level: tracing::Level,
    pub target: String,
    pub message: String,
}

struct Ring {
    next: u64,
    lines: VecDeque<Line>,
}

static RING: Mutex<Ring> = Mutex::new(Ring {
    next: 0,
    lines: VecDeque::new(),
});

/// Record a line (the layer does this for every event that passes the
/// filter; tests may call it directly).
pub fn push(level: tracing::Level, target: &str, message: String) {
    let mut r = RING.lock().unwrap_or_else(|e| e.into_inner());
    let seq = r.next;
    r.next += 1;
    if r.lines.len() == CAPACITY {
        r.lines.pop_front();
    }
    r.lines.push_back(Line {
        seq,
        level,
        target: target.to_string(),
        message,
    });
}

/// Lines with `seq >= from`, and the `from` for the next call.
pub fn since(from: u64) -> (Vec<Line>, u64) {
    let r = RING.lock().unwrap_or_else(|e| e.into_inner());
    let lines = r.lines.iter().filter(|l| l.seq >= from).cloned().collect();
    (lines, r.next)
}

/// The sequence number the next line will get.
pub fn next_seq() -> u64 {
    RING.lock().unwrap_or_else(|e| e.into_inner()).next
}

/// The layer that feeds the ring.
pub struct TapLayer;

impl<S: Subscriber> Layer<S> for TapLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut text = crate::syslog::Text::default();
        event.record(&mut text);
        text.message.push_str(&text.fields);
        push(*meta.level(), meta.target(), text.message);
    }
}
