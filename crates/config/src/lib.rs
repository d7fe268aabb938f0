//! Lanyard configuration: model, YAML parser and validator, and the
//! compilation of a validated configuration into table snapshots
//! ([`build`]).
//!
//! Owns: what the operator wrote (the schema, documented in
//! `docs/config.md`), line-mapped errors, validation, and the pure
//! translation into the tables the workers read.
//! Must not: open sockets, start threads, touch interfaces or read
//! anything but the text it is given (so it can be fuzzed and tested alone).
//!
//! [`parse`] and [`load`] return a fully validated [`Config`] or every
//! problem found, each with file, line, column and field path:
//!
//! ```text
//! lanyard.yaml:14:11: ports[2].vlan: VLAN 30 is not configured (add it under vlans)
//! ```
//!
//! Structural problems (YAML syntax, unknown keys, wrong types) stop at the
//! first one; semantic problems are all reported together.

pub mod build;
mod checks;
pub mod copp;
mod error;
pub mod event_refs;
pub mod events;
pub mod guard;
pub mod ha;
pub mod l2vpn;
mod lines;
pub mod mirror;
mod model;
pub mod mpls;
pub mod multicast;
pub mod service_control;
pub mod services;
pub mod stp;
mod types;
mod validate;
pub mod vrf;
pub mod vrrp;
pub mod vswitch;

use std::path::Path;

pub use error::{ConfigError, ConfigErrors};
pub use lines::LineIndex;
pub use model::{
    limits, AfPacketRing, BusyPollMode, Config, L3Interface, Logging, Management, PortBackend,
    PortConfig, PortMode, Routing, SharedUmemMode, Snmp, StaticMac, StaticRoute, Subinterface,
    SubinterfaceConfig, SwitchSettings, Syslog, UrpfMode, VlanConfig, VlanRouter,
    DEFAULT_AGENTX_SOCKET, DEFAULT_BUSY_POLL_BUDGET, DEFAULT_BUSY_POLL_US, DEFAULT_LOG_FILTER,
    DEFAULT_MAC_AGING, DEFAULT_MAC_TABLE_SIZE, DEFAULT_MTU, DEFAULT_NAPI_TIMEOUT_US,
    DEFAULT_POLL_IDLE_US, DEFAULT_ROUTED_MTU, DEFAULT_SOCKET, DEFAULT_SWITCH_NAME, DEFAULT_VLAN,
    DEFAULT_WORKERS, MAX_L3_MTU,
};
pub use types::{vlan_in_range, IpNet, MacAddr, NativeVlan, Tpid, VlanList, VLAN_MAX, VLAN_MIN};
pub use validate::{validate, Issue};

/// `aa:bb:cc:dd:ee:ff`.
pub fn show_mac(m: [u8; 6]) -> String {
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        m[0], m[1], m[2], m[3], m[4], m[5]
    )
}

/// Reads and parses the configuration file at `path`; see [`parse`].
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let file = path.display().to_string();
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&text, &file),
        Err(e) => Err(ConfigError {
            file,
            line: None,
            column: None,
            field: String::new(),
            message: format!("cannot read configuration: {e}"),
        }
        .into()),
    }
}

/// Parses and validates a configuration. `file_name` is only used in
/// error messages.
pub fn parse(text: &str, file_name: &str) -> Result<Config, ConfigErrors> {
    let cfg = if is_blank_document(text) {
        Config::default()
    } else {
        let de = serde_yaml_ng::Deserializer::from_str(text);
        match serde_path_to_error::deserialize::<_, Config>(de) {
            Ok(cfg) => cfg,
            Err(e) => return Err(structural_error(text, file_name, e).into()),
        }
    };
    let issues = validate(&cfg);
    if issues.is_empty() {
        return Ok(cfg);
    }
    let index = LineIndex::build(text);
    let mut errors: Vec<ConfigError> = issues
        .into_iter()
        .map(|issue| {
            let pos = index.locate(&issue.path);
            ConfigError {
                file: file_name.to_string(),
                line: pos.map(|p| p.0),
                column: pos.map(|p| p.1),
                field: issue.path,
                message: issue.message,
            }
        })
        .collect();
    // File order; errors without a position (absent keys in an empty
    // file) first. The sort is stable, so same-position errors keep the
    // validator's order.
    errors.sort_by_key(|e| (e.line, e.column));
    Err(ConfigErrors { errors })
}

/// True if `text` holds no YAML content (only blank lines, comments or
/// document markers), which serde would otherwise reject.
fn is_blank_document(text: &str) -> bool {
    text.lines().all(|l| {
        let t = l.trim();
        t.is_empty() || t.starts_with('#') || t == "---" || t == "..."
    })
}

fn structural_error(
    text: &str,
    file_name: &str,
    e: serde_path_to_error::Error<serde_yaml_ng::Error>,
) -> ConfigError {
    let path = e.path().to_string();
    let mut field = if path == "." || path == "?" {
        String::new()
    } else {
        path
    };
    let inner = e.into_inner();
    let mut message = strip_path_prefix(&strip_positions(&inner.to_string()), &field);
    let mut pos = inner.location().map(|loc| (loc.line(), loc.column()));
    if let Some(name) = message
        .strip_prefix("duplicate field `")
        .and_then(|m| m.strip_suffix('`'))
    {
        // serde points at the mapping; point at the repeated key instead.
        let dup_path = if field.is_empty() {
            name.to_string()
        } else {
            format!("{field}.{name}")
        };
        if let Some(p) = LineIndex::build(text).duplicate(&dup_path) {
            pos = Some(p);
            message = format!("duplicate key `{name}`");
            field = dup_path;
        }
    }
    if pos.is_none() {
        pos = LineIndex::build(text).locate(&field);
    }
    ConfigError {
        file: file_name.to_string(),
        line: pos.map(|p| p.0),
        column: pos.map(|p| p.1),
        field,
        message,
    }
}

/// serde_yaml_ng prefixes some messages with its own path (`ports[0]: `);
/// the field is reported separately, so drop it.
fn strip_path_prefix(msg: &str, field: &str) -> String {
    let mut p = field;
    while !p.is_empty() {
        if let Some(rest) = msg.strip_prefix(p).and_then(|r| r.strip_prefix(": ")) {
            return rest.to_string();
        }
        p = lines::parent(p);
    }
    msg.to_string()
}

/// Removes libyaml's " at line N column M" / " at position N" fragments;
/// the position is reported separately.
fn strip_positions(msg: &str) -> String {
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    loop {
        let next = [" at line ", " at position "]
            .iter()
            .filter_map(|pat| rest.find(pat).map(|i| (i, *pat)))
            .min();
        let Some((i, pat)) = next else {
            out.push_str(rest);
            break;
        };
        out.push_str(&rest[..i]);
        let after = &rest[i + pat.len()..];
        // Skip "N column M" or "N".
        let skip_num = |s: &str| s.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let mut tail = &after[after.len() - skip_num(after)..];
        if pat == " at line " {
            if let Some(t) = tail.strip_prefix(" column ") {
                tail = &t[t.len() - skip_num(t)..];
            }
        }
        if tail.len() == after.len() {
            // Not followed by a number: keep the text as is.
            out.push_str(pat);
        }
        rest = tail;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_positions() {
        assert_eq!(
            strip_positions("did not find expected key at line 3 column 5, while parsing a block mapping at line 1 column 1"),
            "did not find expected key, while parsing a block mapping"
        );
        assert_eq!(
            strip_positions("unknown field `x` at line 2 column 3"),
            "unknown field `x`"
        );
        assert_eq!(strip_positions("x at position 7"), "x");
        assert_eq!(strip_positions("look at line up"), "look at line up");
    }

    #[test]
    fn blank_documents() {
        assert!(is_blank_document(""));
        assert!(is_blank_document("# hi\n---\n\n"));
        assert!(!is_blank_document("ports: []"));
    }
}
