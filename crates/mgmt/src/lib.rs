//! What the operator types and reads.
//!
//! Owns: the command table (words → API request + renderer, help, the
//! parser; [`cli`]) and the text of every `show` command ([`show`]: pure
//! functions from the API's JSON answer to a switch-like table).
//! Must not: hold or reach switch state; it sees only JSON answers, so the
//! CLI client, scripts and golden tests all read the same source. The API
//! server that produces those answers lives in `control::api`, next to
//! the threads whose state it reads.

pub mod cli;
pub mod show;
