//! `mirror-sessions:` — port mirroring (SPAN). A session copies frames
//! received and/or sent on its source ports and VLANs, byte for byte, to
//! its destination port. A destination port is a monitor port: it carries
//! no VLAN and forwards nothing else.

use serde::{Deserialize, Serialize};

/// Sessions a switch may have.
pub const MAX_SESSIONS: usize = 16;

/// Which frames of the sources a session copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MirrorDirection {
    /// Frames received on the sources, as received.
    Rx,
    /// Frames sent by the sources, as sent.
    Tx,
    /// Both.
    #[default]
    Both,
}

impl MirrorDirection {
    pub fn rx(self) -> bool {
        self != MirrorDirection::Tx
    }
    pub fn tx(self) -> bool {
        self != MirrorDirection::Rx
    }
}

/// One entry of `mirror-sessions:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct MirrorSession {
    pub name: String,
    /// Ports whose traffic is copied.
    #[serde(default)]
    pub source_ports: Vec<String>,
    /// VLANs whose traffic is copied (received in / sent in the VLAN).
    #[serde(default)]
    pub source_vlans: Vec<u16>,
    #[serde(default)]
    pub direction: MirrorDirection,
    /// The monitor port the copies leave by.
    pub destination: String,
}

#[cfg(test)]
mod tests {
    const GOOD: &str = "vlans:\n  - id: 10\nports:\n  - {name: a, vlan: 10}\n  - {name: b, vlan: 10}\n  - {name: m1}\n  - {name: m2}\n  - {name: r, mode: routed}\nmirror-sessions:\n  - {name: s1, source-ports: [a], direction: rx, destination: m1}\n  - {name: s2, source-vlans: [10], destination: m2}\n";

    #[test]
    fn sessions_parse_and_monitor_ports_are_known() {
        let cfg = super::super::parse(GOOD, "t").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.mirror_sessions.len(), 2);
        assert!(cfg.mirror_sessions[0].direction.rx() && !cfg.mirror_sessions[0].direction.tx());
        assert!(cfg.mirror_sessions[1].direction.rx() && cfg.mirror_sessions[1].direction.tx());
        assert!(cfg.is_monitor_port(2) && cfg.is_monitor_port(3) && !cfg.is_monitor_port(0));
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (
                "destination: m1}",
                "destination: nope}",
                "mirror-sessions[0].destination",
            ),
            (
                "destination: m1}",
                "destination: r}",
                "mirror-sessions[0].destination",
            ),
            (
                "destination: m2}",
                "destination: m1}",
                "mirror-sessions[1].destination",
            ),
            (
                "source-ports: [a]",
                "source-ports: [m2]",
                "mirror-sessions[0].source-ports[0]",
            ),
            (
                "source-vlans: [10]",
                "source-vlans: [30]",
                "mirror-sessions[1].source-vlans[0]",
            ),
            ("name: s2", "name: s1", "mirror-sessions[1].name"),
            ("source-ports: [a], ", "", "mirror-sessions[0]"),
        ];
        for (from, to, field) in cases {
            let text = GOOD.replacen(from, to, 1);
            let e = super::super::parse(&text, "t").expect_err(to);
            assert!(
                e.errors.iter().any(|x| x.field == field),
                "{to}: want {field}, got {e}"
            );
        }
    }
}
