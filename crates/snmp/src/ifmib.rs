//! The IF-MIB view of the ports (RFC 2863): one [`Row`] per port from
//! `show interfaces` and `show counters`, laid out as the OIDs of
//! `ifNumber`, `ifTable` and `ifXTable` in lexicographic order.

use crate::wire::Value as Snmp;
use crate::Query;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::ops::Bound;

/// `IF-MIB::ifNumber` (1.3.6.1.2.1.2.1), a scalar.
pub const IF_NUMBER: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 1];
/// `IF-MIB::ifTable` (1.3.6.1.2.1.2.2).
pub const IF_TABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 2, 2];
/// `IF-MIB::ifXTable` (1.3.6.1.2.1.31.1.1).
pub const IF_XTABLE: &[u32] = &[1, 3, 6, 1, 2, 1, 31, 1, 1];

/// One port as IF-MIB sees it. Counters are the switch's own (what
/// `show interfaces`/`show counters` give), not the kernel's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// `ifIndex`: the port's position in the config, from 1.
    pub index: u32,
    pub name: String,
    pub mtu: u32,
    /// `ifAdminStatus`: 1 up, 2 down (`shutdown`).
    pub admin: i32,
    /// `ifOperStatus`: 1 up, 2 down, 6 notPresent (interface missing).
    pub oper: i32,
    pub in_octets: u64,
    /// Frames received to a unicast, a multicast (not broadcast) and the
    /// broadcast address.
    pub in_ucast: u64,
    pub in_mcast: u64,
    pub in_bcast: u64,
    pub out_octets: u64,
    pub out_ucast: u64,
    pub out_mcast: u64,
    pub out_bcast: u64,
    pub in_discards: u64,
    pub in_errors: u64,
    pub in_unknown_protos: u64,
    pub out_discards: u64,
    pub out_errors: u64,
    /// Link speed in Mbit/s, 0 = not known.
    pub speed_mbps: u64,
    /// `ifPhysAddress`: the interface's MAC (`None`: missing, served
    /// as a zero-length string as RFC 2863 says).
    pub mac: Option<[u8; 6]>,
    /// `ifLastChange`: the master's sysUpTime (1/100 s) when
    /// `ifOperStatus` last changed; 0 if not since the master started.
    pub last_change: u32,
}

/// `aa:bb:cc:dd:ee:ff` (how the API writes a MAC) to its octets.
fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut m = [0u8; 6];
    let mut parts = s.split(':');
    for b in m.iter_mut() {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(m)
}

/// Where a drop reason of `show counters` lands in IF-MIB. Reasons not
/// named here (policy drops at ingress: VLAN filtering, ACL, policer,
/// storm control, blocked ports, full receive ring) are `ifInDiscards`.
fn drop_column(reason: &str) -> DropColumn {
    match reason {
        "malformed" | "oversize" | "invalid-source" => DropColumn::InErrors,
        "l2-control" => DropColumn::InUnknownProtos,
        "port-down" | "tx-ring-full" | "queue-full" => DropColumn::OutDiscards,
        "tx-error" => DropColumn::OutErrors,
        _ => DropColumn::InDiscards,
    }
}

enum DropColumn {
    InDiscards,
    InErrors,
    InUnknownProtos,
    OutDiscards,
    OutErrors,
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn ask(q: &Query, req: Value) -> Option<Value> {
    let r = q(&req);
    (r.get("ok") == Some(&Value::Bool(true))).then(|| r["data"].clone())
}

impl Row {
    /// A row from one `show interfaces` entry and its `show counters`
    /// entry (`None` if the port has none yet).
    pub fn from_show(p: &Value, c: Option<&Value>) -> Row {
        let state = p.get("state").and_then(Value::as_str).unwrap_or("");
        let mut r = Row {
            index: u(p, "id") as u32 + 1,
            name: p
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
            mtu: u(p, "mtu") as u32,
            admin: if state == "admin-down" { 2 } else { 1 },
            oper: match state {
                "up" => 1,
                "missing" => 6,
                _ => 2,
            },
            in_octets: u(p, "rx_bytes"),
            in_mcast: u(p, "rx_multicast"),
            in_bcast: u(p, "rx_broadcast"),
            in_ucast: u(p, "rx_frames")
                .saturating_sub(u(p, "rx_multicast"))
                .saturating_sub(u(p, "rx_broadcast")),
            out_octets: u(p, "tx_bytes"),
            out_mcast: u(p, "tx_multicast"),
            out_bcast: u(p, "tx_broadcast"),
            out_ucast: u(p, "tx_frames")
                .saturating_sub(u(p, "tx_multicast"))
                .saturating_sub(u(p, "tx_broadcast")),
            out_errors: u(p, "port_errors"),
            speed_mbps: u(p, "speed_mbps"),
            mac: p.get("mac").and_then(Value::as_str).and_then(parse_mac),
            ..Row::default()
        };
        if let Some(d) = c.and_then(|c| c.get("drops")).and_then(Value::as_object) {
            for (reason, n) in d {
                let n = n.as_u64().unwrap_or(0);
                let col = match drop_column(reason) {
                    DropColumn::InDiscards => &mut r.in_discards,
                    DropColumn::InErrors => &mut r.in_errors,
                    DropColumn::InUnknownProtos => &mut r.in_unknown_protos,
                    DropColumn::OutDiscards => &mut r.out_discards,
                    DropColumn::OutErrors => &mut r.out_errors,
                };
                *col = col.saturating_add(n);
            }
        }
        r
    }
}

/// The served OIDs and their values, sorted.
#[derive(Debug, Default)]
pub struct IfMib {
    vars: BTreeMap<Vec<u32>, Snmp>,
}

fn oid(base: &[u32], tail: &[u32]) -> Vec<u32> {
    let mut o = base.to_vec();
    o.extend_from_slice(tail);
    o
}

fn text(s: &str) -> Snmp {
    Snmp::text(s)
}

impl IfMib {
    /// Asks the API (`show interfaces`, `show counters`) and lays the
    /// answer out. An API error gives an empty view (`ifNumber` 0).
    pub fn collect(q: &Query) -> IfMib {
        IfMib::from_rows(&IfMib::rows(q))
    }

    /// The rows of [`IfMib::collect`] (`last_change` 0), for the session
    /// to fill in what it tracks itself.
    pub fn rows(q: &Query) -> Vec<Row> {
        let ifs = ask(q, json!({"cmd": "show-interfaces"})).unwrap_or(Value::Null);
        let cs = ask(q, json!({"cmd": "show-counters"})).unwrap_or(Value::Null);
        let counters = cs["ports"].as_array().cloned().unwrap_or_default();
        ifs.as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        let c = counters.iter().find(|c| c.get("name") == p.get("name"));
                        Row::from_show(p, c)
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn from_rows(rows: &[Row]) -> IfMib {
        let mut vars = BTreeMap::new();
        vars.insert(oid(IF_NUMBER, &[0]), Snmp::Integer(rows.len() as i32));
        for r in rows {
            let i = r.index;
            let t = |col: u32| oid(IF_TABLE, &[1, col, i]);
            let x = |col: u32| oid(IF_XTABLE, &[1, col, i]);
            // Counter32 columns wrap as RFC 2863 says: the low 32 bits.
            let c32 = |v: u64| Snmp::Counter32(v as u32);
            vars.insert(t(1), Snmp::Integer(i as i32));
            vars.insert(t(2), text(&r.name));
            vars.insert(t(3), Snmp::Integer(6)); // ethernetCsmacd
            vars.insert(t(4), Snmp::Integer(r.mtu as i32));
            // ifSpeed in bit/s, at most 2^32-1 (RFC 2863: then
            // ifHighSpeed, in Mbit/s, says the real speed); 0 = unknown.
            let bps = r
                .speed_mbps
                .saturating_mul(1_000_000)
                .min(u64::from(u32::MAX));
            vars.insert(t(5), Snmp::Gauge32(bps as u32));
            vars.insert(
                t(6),
                Snmp::OctetString(r.mac.map(|m| m.to_vec()).unwrap_or_default()),
            );
            vars.insert(t(7), Snmp::Integer(r.admin));
            vars.insert(t(8), Snmp::Integer(r.oper));
            vars.insert(t(9), Snmp::TimeTicks(r.last_change));
            vars.insert(t(10), c32(r.in_octets));
            vars.insert(t(11), c32(r.in_ucast));
            vars.insert(t(13), c32(r.in_discards));
            vars.insert(t(14), c32(r.in_errors));
            vars.insert(t(15), c32(r.in_unknown_protos));
            vars.insert(t(16), c32(r.out_octets));
            vars.insert(t(17), c32(r.out_ucast));
            vars.insert(t(19), c32(r.out_discards));
            vars.insert(t(20), c32(r.out_errors));
            vars.insert(x(1), text(&r.name));
            vars.insert(x(2), c32(r.in_mcast));
            vars.insert(x(3), c32(r.in_bcast));
            vars.insert(x(4), c32(r.out_mcast));
            vars.insert(x(5), c32(r.out_bcast));
            vars.insert(x(6), Snmp::Counter64(r.in_octets));
            vars.insert(x(7), Snmp::Counter64(r.in_ucast));
            vars.insert(x(8), Snmp::Counter64(r.in_mcast));
            vars.insert(x(9), Snmp::Counter64(r.in_bcast));
            vars.insert(x(10), Snmp::Counter64(r.out_octets));
            vars.insert(x(11), Snmp::Counter64(r.out_ucast));
            vars.insert(x(12), Snmp::Counter64(r.out_mcast));
            vars.insert(x(13), Snmp::Counter64(r.out_bcast));
            vars.insert(x(14), Snmp::Integer(1)); // linkUpDownTrapEnable: enabled
            vars.insert(
                x(15),
                Snmp::Gauge32(r.speed_mbps.min(u64::from(u32::MAX)) as u32),
            );
            vars.insert(x(16), Snmp::Integer(1)); // promiscuous: a switch port is
            vars.insert(x(17), Snmp::Integer(1)); // connector present
            vars.insert(x(18), text(""));
        }
        IfMib { vars }
    }

    /// The value at exactly `name`.
    pub fn get(&self, name: &[u32]) -> Option<&Snmp> {
        self.vars.get(name)
    }

    /// The first variable after `start` (at `start` too if `include`)
    /// and before `end` (no bound if `end` is empty).
    pub fn next(&self, start: &[u32], include: bool, end: &[u32]) -> Option<(&[u32], &Snmp)> {
        let lo = if include {
            Bound::Included(start)
        } else {
            Bound::Excluded(start)
        };
        self.vars
            .range::<[u32], _>((lo, Bound::Unbounded))
            .next()
            .filter(|(k, _)| end.is_empty() || k.as_slice() < end)
            .map(|(k, v)| (k.as_slice(), v))
    }

    /// Number of served variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_land_in_their_columns_and_sum_to_the_total() {
        let p = json!({"name":"e1","id":2,"state":"up","mtu":1500,"rx_frames":10,
                       "rx_bytes":1000,"tx_frames":7,"tx_bytes":700,"port_errors":1});
        let c = json!({"name":"e1","drops":{"malformed":1,"oversize":2,"tagged-on-access":3,
                       "acl-deny":4,"l2-control":5,"tx-ring-full":6,"queue-full":7,"tx-error":8}});
        let r = Row::from_show(&p, Some(&c));
        assert_eq!(r.index, 3);
        assert_eq!((r.admin, r.oper), (1, 1));
        assert_eq!(r.in_errors, 3);
        assert_eq!(r.in_discards, 7);
        assert_eq!(r.in_unknown_protos, 5);
        assert_eq!(r.out_discards, 13);
        assert_eq!(r.out_errors, 9);
        let missing = Row::from_show(&json!({"state":"missing"}), None);
        assert_eq!(missing.oper, 6);
        let shut = Row::from_show(&json!({"state":"admin-down"}), None);
        assert_eq!((shut.admin, shut.oper), (2, 2));
    }

    /// ifInUcastPkts and the HC unicast columns hold unicast frames only;
    /// multicast and broadcast have their own columns (RFC 2863).
    #[test]
    fn unicast_multicast_and_broadcast_columns_split_the_frames() {
        let p = json!({"name":"e1","id":0,"state":"up","rx_frames":10,"rx_multicast":3,
                       "rx_broadcast":2,"tx_frames":20,"tx_multicast":4,"tx_broadcast":1});
        let m = IfMib::from_rows(&[Row::from_show(&p, None)]);
        let t = |col| m.get(&oid(IF_TABLE, &[1, col, 1])).cloned();
        let x = |col| m.get(&oid(IF_XTABLE, &[1, col, 1])).cloned();
        assert_eq!(t(11), Some(Snmp::Counter32(5)));
        assert_eq!(t(17), Some(Snmp::Counter32(15)));
        assert_eq!(
            [x(2), x(3), x(4), x(5)],
            [3, 2, 4, 1].map(|n| Some(Snmp::Counter32(n)))
        );
        assert_eq!(
            [x(7), x(8), x(9), x(11), x(12), x(13)],
            [5, 3, 2, 15, 4, 1].map(|n| Some(Snmp::Counter64(n)))
        );
        // A switch older than the split: every frame counts as unicast.
        let old = json!({"name":"e1","id":0,"state":"up","rx_frames":10});
        assert_eq!(Row::from_show(&old, None).in_ucast, 10);
    }

    #[test]
    fn walk_order_is_column_then_index_and_counter32_wraps() {
        let rows = [
            Row {
                index: 1,
                name: "a".into(),
                in_octets: (1u64 << 32) + 5,
                ..Row::default()
            },
            Row {
                index: 2,
                name: "b".into(),
                ..Row::default()
            },
        ];
        let m = IfMib::from_rows(&rows);
        let (k, _) = m.next(IF_TABLE, false, &[]).unwrap();
        assert_eq!(k, oid(IF_TABLE, &[1, 1, 1]));
        let (k, _) = m.next(&oid(IF_TABLE, &[1, 1, 1]), false, &[]).unwrap();
        assert_eq!(k, oid(IF_TABLE, &[1, 1, 2]));
        let (k, _) = m.next(&oid(IF_TABLE, &[1, 1, 2]), false, &[]).unwrap();
        assert_eq!(k, oid(IF_TABLE, &[1, 2, 1]));
        assert_eq!(
            m.get(&oid(IF_TABLE, &[1, 10, 1])),
            Some(&Snmp::Counter32(5))
        );
        assert_eq!(
            m.get(&oid(IF_XTABLE, &[1, 6, 1])),
            Some(&Snmp::Counter64((1u64 << 32) + 5))
        );
        assert_eq!(m.get(&oid(IF_NUMBER, &[0])), Some(&Snmp::Integer(2)));
        // Bounded by the end of the search range.
        assert!(m
            .next(IF_TABLE, false, &oid(IF_TABLE, &[1, 1, 1]))
            .is_none());
        assert!(m.next(&oid(IF_XTABLE, &[1, 18, 2]), false, &[]).is_none());
    }

    /// ifSpeed in bit/s up to its 32-bit ceiling, ifHighSpeed in Mbit/s;
    /// 0 when the driver says nothing.
    #[test]
    fn speeds_in_both_columns() {
        let row = |i: u32, mbps: u64| Row {
            index: i,
            speed_mbps: mbps,
            ..Row::default()
        };
        let m = IfMib::from_rows(&[row(1, 1000), row(2, 10_000), row(3, 0)]);
        let g = |t: &[u32], col: u32, i: u32| m.get(&oid(t, &[1, col, i])).cloned();
        assert_eq!(g(IF_TABLE, 5, 1), Some(Snmp::Gauge32(1_000_000_000)));
        assert_eq!(g(IF_XTABLE, 15, 1), Some(Snmp::Gauge32(1000)));
        assert_eq!(g(IF_TABLE, 5, 2), Some(Snmp::Gauge32(u32::MAX)));
        assert_eq!(g(IF_XTABLE, 15, 2), Some(Snmp::Gauge32(10_000)));
        assert_eq!(g(IF_TABLE, 5, 3), Some(Snmp::Gauge32(0)));
        assert_eq!(g(IF_XTABLE, 15, 3), Some(Snmp::Gauge32(0)));
        let p = serde_json::json!({"id": 0, "name": "a", "state": "up", "speed_mbps": 25000});
        assert_eq!(Row::from_show(&p, None).speed_mbps, 25_000);
    }

    /// ifPhysAddress carries the MAC's six octets (empty when missing),
    /// ifLastChange what the session tracked.
    #[test]
    fn mac_and_last_change() {
        let p = json!({"id": 0, "name": "a", "state": "up", "mac": "02:ff:00:80:fe:01"});
        let mut r = Row::from_show(&p, None);
        assert_eq!(r.mac, Some([0x02, 0xff, 0x00, 0x80, 0xfe, 0x01]));
        r.last_change = 4321;
        let gone = Row::from_show(&json!({"id": 1, "state": "missing", "mac": null}), None);
        assert_eq!(gone.mac, None);
        for bad in [
            "02:ff:00:80:fe",
            "02:ff:00:80:fe:01:02",
            "zz:ff:00:80:fe:01",
            "",
        ] {
            assert_eq!(parse_mac(bad), None, "{bad}");
        }
        let m = IfMib::from_rows(&[r, gone]);
        let g = |col: u32, i: u32| m.get(&oid(IF_TABLE, &[1, col, i])).cloned();
        assert_eq!(
            g(6, 1),
            Some(Snmp::OctetString(vec![0x02, 0xff, 0x00, 0x80, 0xfe, 0x01]))
        );
        assert_eq!(g(6, 2), Some(Snmp::OctetString(vec![])));
        assert_eq!(g(9, 1), Some(Snmp::TimeTicks(4321)));
        assert_eq!(g(9, 2), Some(Snmp::TimeTicks(0)));
    }
}
