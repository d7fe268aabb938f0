//! SNMP: Lanyard's ports in IF-MIB `ifTable`/`ifXTable` (and `ifNumber`),
//! served through the host's net-snmp agent (`snmpd`) as an AgentX
//! subagent (RFC 2741) on the socket in `management.snmp.agentx-socket`
//! (off by default).
//!
//! Owns: the IF-MIB view of `show interfaces`/`show counters`
//! ([`IfMib`]), answering the master agent's Get/GetNext/GetBulk
//! ([`answer`]), `ifLastChange` and the linkUp/linkDown notifications
//! ([`LinkTracker`]), and the session with reconnects ([`serve`]).
//! Must not: read the switch's state any other way than the API requests
//! `show` renders, so `snmpwalk` and `show` never disagree. Requests
//! are decoded by the `agentx` crate; what carries values out
//! (Response, Notify) is encoded in `wire` (docs/dependencies.md).

mod ifmib;
mod links;
mod session;
mod wire;

pub use ifmib::{IfMib, Row, IF_NUMBER, IF_TABLE, IF_XTABLE};
pub use links::{Link, LinkTracker, MasterClock};
pub use session::{answer, master_response, serve, Answer, MasterResponse, SnmpAgent};
pub use wire::Value;

/// Answers one API request (`{"cmd":"show-interfaces"}`) with the API's
/// envelope (`{"ok":true,"data":...}` or `{"ok":false,"error":...}`).
pub type Query = dyn Fn(&serde_json::Value) -> serde_json::Value + Send + Sync;
