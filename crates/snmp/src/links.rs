//! Link state as IF-MIB reports it over time: `ifLastChange` in the
//! master's sysUpTime and the linkUp/linkDown notifications (RFC 2863),
//! from the ports' `ifOperStatus` polled through the API.

use crate::ifmib::{Row, IF_TABLE};
use crate::wire::Value;
use std::collections::HashMap;
use std::time::Instant;

/// `SNMPv2-MIB::snmpTrapOID.0`, the first variable of a notification.
pub const SNMP_TRAP_OID: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 4, 1, 0];
/// `IF-MIB::linkDown` (as defined in SNMPv2-MIB's snmpTraps).
pub const LINK_DOWN: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 5, 3];
/// `IF-MIB::linkUp`.
pub const LINK_UP: &[u32] = &[1, 3, 6, 1, 6, 3, 1, 1, 5, 4];

const DOWN: i32 = 2;
const NOT_PRESENT: i32 = 6;

/// The master agent's sysUpTime (1/100 s): `ticks` at `at`, as the
/// master said in its Response to our Open.
#[derive(Clone, Copy, Debug)]
pub struct MasterClock {
    pub at: Instant,
    pub ticks: u32,
}

impl MasterClock {
    /// The master's sysUpTime at `t`; 0 if `t` is before the master
    /// started (RFC 2863: a state entered before the agent's last
    /// re-initialisation reads 0).
    pub fn ticks_at(&self, t: Instant) -> u32 {
        match t.checked_duration_since(self.at) {
            Some(d) => self.ticks.wrapping_add((d.as_millis() / 10) as u32),
            None => {
                let back = (self.at - t).as_millis() / 10;
                u32::try_from(back)
                    .ok()
                    .and_then(|b| self.ticks.checked_sub(b))
                    .unwrap_or(0)
            }
        }
    }
}

/// A notification due for a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Up,
    Down,
}

/// Per port (by name): the last `ifOperStatus` seen and when it changed
/// (`None`: not since the subagent started). Kept across AgentX
/// sessions, so a change while snmpd is away is notified on reconnect.
#[derive(Debug, Default)]
pub struct LinkTracker {
    ports: HashMap<String, (i32, Option<Instant>)>,
}

impl LinkTracker {
    /// Records the ports' status seen at `now` and returns the
    /// notifications due (RFC 2863): linkDown when a port enters down
    /// from any state but notPresent, linkUp when it leaves down for any
    /// state but notPresent. A port seen for the first time is a
    /// baseline, not a change. Ports no longer configured are forgotten.
    pub fn update(&mut self, rows: &[Row], now: Instant) -> Vec<(Link, Row)> {
        let mut due = Vec::new();
        for r in rows {
            match self.ports.get_mut(&r.name) {
                None => {
                    self.ports.insert(r.name.clone(), (r.oper, None));
                }
                Some((old, changed)) if *old != r.oper => {
                    if r.oper == DOWN && *old != NOT_PRESENT {
                        due.push((Link::Down, r.clone()));
                    } else if *old == DOWN && r.oper != NOT_PRESENT {
                        due.push((Link::Up, r.clone()));
                    }
                    *old = r.oper;
                    *changed = Some(now);
                }
                Some(_) => {}
            }
        }
        if self.ports.len() > rows.len() {
            self.ports.retain(|n, _| rows.iter().any(|r| &r.name == n));
        }
        due
    }

    /// Fills `ifLastChange` of `rows` in the master's clock.
    pub fn stamp(&self, rows: &mut [Row], clock: &MasterClock) {
        for r in rows {
            r.last_change = self
                .ports
                .get(&r.name)
                .and_then(|(_, t)| *t)
                .map_or(0, |t| clock.ticks_at(t));
        }
    }
}

/// The variables of a linkUp/linkDown notification (RFC 2863):
/// snmpTrapOID.0, then ifIndex, ifAdminStatus, ifOperStatus of the port.
pub fn notification(link: Link, r: &Row) -> Vec<(Vec<u32>, Value)> {
    let col = |c: u32| {
        let mut o = IF_TABLE.to_vec();
        o.extend_from_slice(&[1, c, r.index]);
        o
    };
    let trap = match link {
        Link::Up => LINK_UP,
        Link::Down => LINK_DOWN,
    };
    vec![
        (
            SNMP_TRAP_OID.to_vec(),
            Value::ObjectIdentifier(trap.to_vec()),
        ),
        (col(1), Value::Integer(r.index as i32)),
        (col(7), Value::Integer(r.admin)),
        (col(8), Value::Integer(r.oper)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const UP: i32 = 1;

    fn row(name: &str, index: u32, oper: i32) -> Row {
        Row {
            index,
            name: name.into(),
            admin: 1,
            oper,
            ..Row::default()
        }
    }

    #[test]
    fn down_and_up_are_notified_once_and_stamped() {
        let t0 = Instant::now();
        let clock = MasterClock { at: t0, ticks: 500 };
        let mut tr = LinkTracker::default();
        assert!(tr
            .update(&[row("a", 1, UP), row("b", 2, UP)], t0)
            .is_empty());
        let mut rows = [row("a", 1, UP), row("b", 2, UP)];
        tr.stamp(&mut rows, &clock);
        assert_eq!((rows[0].last_change, rows[1].last_change), (0, 0));

        let t1 = t0 + Duration::from_millis(2500);
        let due = tr.update(&[row("a", 1, UP), row("b", 2, DOWN)], t1);
        assert_eq!(due.len(), 1);
        assert_eq!((due[0].0, due[0].1.index), (Link::Down, 2));
        // The same state again: nothing new.
        assert!(tr
            .update(&[row("a", 1, UP), row("b", 2, DOWN)], t1)
            .is_empty());
        let mut rows = [row("a", 1, UP), row("b", 2, DOWN)];
        tr.stamp(&mut rows, &clock);
        assert_eq!((rows[0].last_change, rows[1].last_change), (0, 750));

        let due = tr.update(&[row("a", 1, UP), row("b", 2, UP)], t1);
        assert_eq!(due[0].0, Link::Up);
        let vbs = notification(Link::Up, &due[0].1);
        assert_eq!(vbs[0].1, Value::ObjectIdentifier(LINK_UP.to_vec()));
        assert_eq!(vbs[1].0, [IF_TABLE, &[1, 1, 2]].concat());
        assert_eq!(vbs[3].1, Value::Integer(UP));
    }

    /// RFC 2863: nothing for a port that appears or disappears.
    #[test]
    fn not_present_is_not_a_link_change() {
        let t = Instant::now();
        let mut tr = LinkTracker::default();
        tr.update(&[row("a", 1, NOT_PRESENT)], t);
        assert!(tr.update(&[row("a", 1, DOWN)], t).is_empty());
        assert!(tr.update(&[row("a", 1, NOT_PRESENT)], t).is_empty());
        tr.update(&[row("a", 1, UP)], t);
        assert!(tr.update(&[row("a", 1, NOT_PRESENT)], t).is_empty());
        // Forgotten when no longer configured: a new port of that name
        // is a baseline again.
        tr.update(&[], t);
        assert!(tr.update(&[row("a", 1, DOWN)], t).is_empty());
    }

    #[test]
    fn changes_before_the_master_started_read_zero() {
        let t0 = Instant::now() + Duration::from_secs(100);
        let clock = MasterClock { at: t0, ticks: 300 };
        assert_eq!(clock.ticks_at(t0 - Duration::from_secs(2)), 100);
        assert_eq!(clock.ticks_at(t0 - Duration::from_secs(4)), 0);
        assert_eq!(clock.ticks_at(t0 + Duration::from_secs(1)), 400);
    }
}
