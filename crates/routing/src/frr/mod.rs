//! Routes from FRRouting: zebra's Forwarding Plane Manager (`dplane_fpm_nl`).
//!
//! - [`fpm`]: the FPM framing and the TCP server zebra connects to.
//! - [`netlink`]: the decoder for the rtnetlink messages inside the frames.
//! - [`Rib`]: a plain mirror of what zebra sent (routes and next-hop
//!   objects, with group resolution and stale sweeping after a resync), for
//!   consumers that want state rather than a stream of changes.
//!
//! See `docs/frr.md` for the FRR configuration Lanyard expects.

pub mod fpm;
pub mod netlink;

use std::collections::{BTreeMap, HashMap};

pub use fpm::{FpmConfig, FpmCounters, FpmEvent, FpmHandle, FpmServer, FpmStats};
pub use netlink::{decode, DecodeError, NextHop, NextHopObject, NextHops, Prefix, RouteUpdate};

/// One installed route as zebra described it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub protocol: u8,
    pub metric: u32,
    pub nexthops: NextHops,
}

/// Mirror of zebra's FIB as sent over FPM.
#[derive(Clone, Debug, Default)]
pub struct Rib {
    /// (table, prefix) -> (route, stale).
    routes: BTreeMap<(u32, Prefix), (Route, bool)>,
    nexthops: HashMap<u32, (NextHopObject, bool)>,
}

impl Rib {
    pub fn new() -> Rib {
        Rib::default()
    }

    /// Applies one update.
    pub fn apply(&mut self, u: &RouteUpdate) {
        match u {
            RouteUpdate::Add {
                prefix,
                table,
                protocol,
                metric,
                nexthops,
                ..
            } => {
                let r = Route {
                    protocol: *protocol,
                    metric: *metric,
                    nexthops: nexthops.clone(),
                };
                self.routes.insert((*table, *prefix), (r, false));
            }
            RouteUpdate::Del { prefix, table, .. } => {
                self.routes.remove(&(*table, *prefix));
            }
            RouteUpdate::NextHopAdd { id, nexthop, .. } => {
                self.nexthops.insert(*id, (nexthop.clone(), false));
            }
            RouteUpdate::NextHopDel { id } => {
                self.nexthops.remove(id);
            }
            // Labels live in the LFIB (the FIB manager), not in this RIB.
            RouteUpdate::Ignored { .. } | RouteUpdate::Label(_) => {}
        }
    }

    /// Applies a batch, or reacts to a server event: `Connected` marks
    /// everything stale, `Settled` sweeps what the replay did not refresh.
    pub fn handle(&mut self, ev: &FpmEvent) {
        match ev {
            FpmEvent::Connected { .. } => self.mark_stale(),
            FpmEvent::Updates(us) => us.iter().for_each(|u| self.apply(u)),
            FpmEvent::Settled => {
                self.sweep_stale();
            }
            FpmEvent::Disconnected { .. } => {}
        }
    }

    /// Marks every entry stale (call when zebra reconnects).
    pub fn mark_stale(&mut self) {
        self.routes.values_mut().for_each(|v| v.1 = true);
        self.nexthops.values_mut().for_each(|v| v.1 = true);
    }

    /// Removes entries not refreshed since [`mark_stale`](Self::mark_stale);
    /// returns how many went.
    pub fn sweep_stale(&mut self) -> usize {
        let before = self.routes.len() + self.nexthops.len();
        self.routes.retain(|_, v| !v.1);
        self.nexthops.retain(|_, v| !v.1);
        before - self.routes.len() - self.nexthops.len()
    }

    pub fn len(&self) -> usize {
        self.routes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    pub fn get(&self, table: u32, prefix: &Prefix) -> Option<&Route> {
        self.routes.get(&(table, *prefix)).map(|v| &v.0)
    }

    /// All routes, ordered by table then prefix.
    pub fn routes(&self) -> impl Iterator<Item = (u32, &Prefix, &Route)> {
        self.routes.iter().map(|((t, p), (r, _))| (*t, p, r))
    }

    pub fn nexthop(&self, id: u32) -> Option<&NextHopObject> {
        self.nexthops.get(&id).map(|v| &v.0)
    }

    /// The concrete next hops of a route: next-hop object references and
    /// groups resolved (nested groups up to depth 4), weights multiplied
    /// through. `None` if a referenced object is unknown.
    pub fn resolve(&self, nhs: &NextHops) -> Option<Vec<NextHop>> {
        match nhs {
            NextHops::List(l) => Some(l.clone()),
            NextHops::Id(id) => {
                let mut out = Vec::new();
                self.resolve_id(*id, 1, 0, &mut out)?;
                Some(out)
            }
            _ => Some(Vec::new()),
        }
    }

    fn resolve_id(&self, id: u32, weight: u16, depth: u8, out: &mut Vec<NextHop>) -> Option<()> {
        if depth > 4 {
            return None;
        }
        match self.nexthop(id)? {
            NextHopObject::Single(nh) => out.push(NextHop {
                weight: weight.saturating_mul(nh.weight.max(1)),
                ..*nh
            }),
            NextHopObject::Group(g) => {
                for (member, w) in g {
                    self.resolve_id(*member, weight.saturating_mul(*w), depth + 1, out)?;
                }
            }
            NextHopObject::Blackhole => {}
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nh(gw: &str) -> NextHop {
        NextHop {
            gateway: Some(gw.parse().unwrap()),
            ifindex: 2,
            weight: 1,
        }
    }

    #[test]
    fn rib_resolves_groups_and_sweeps() {
        let mut rib = Rib::new();
        let p: Prefix = "10.0.0.0/8".parse().unwrap();
        let q: Prefix = "10.1.0.0/16".parse().unwrap();
        rib.handle(&FpmEvent::Updates(vec![
            RouteUpdate::NextHopAdd {
                id: 1,
                family: 2,
                protocol: 11,
                nexthop: NextHopObject::Single(nh("192.0.2.1")),
            },
            RouteUpdate::NextHopAdd {
                id: 2,
                family: 2,
                protocol: 11,
                nexthop: NextHopObject::Single(nh("192.0.2.2")),
            },
            RouteUpdate::NextHopAdd {
                id: 3,
                family: 0,
                protocol: 11,
                nexthop: NextHopObject::Group(vec![(1, 1), (2, 2)]),
            },
            RouteUpdate::Add {
                prefix: p,
                table: 254,
                protocol: 196,
                metric: 0,
                nexthops: NextHops::Id(3),
                replace: true,
            },
            RouteUpdate::Add {
                prefix: q,
                table: 254,
                protocol: 196,
                metric: 0,
                nexthops: NextHops::Id(99),
                replace: true,
            },
        ]));
        let r = rib.get(254, &p).unwrap();
        let res = rib.resolve(&r.nexthops).unwrap();
        assert_eq!(res.len(), 2);
        assert_eq!(res[1].weight, 2);
        assert!(rib.resolve(&rib.get(254, &q).unwrap().nexthops).is_none());
        // Reconnect: only p is replayed; q and the unused objects go.
        rib.handle(&FpmEvent::Connected {
            peer: "127.0.0.1:1".parse().unwrap(),
        });
        rib.apply(&RouteUpdate::Add {
            prefix: p,
            table: 254,
            protocol: 196,
            metric: 0,
            nexthops: NextHops::List(vec![nh("192.0.2.9")]),
            replace: true,
        });
        rib.handle(&FpmEvent::Settled);
        assert_eq!(rib.len(), 1);
        assert!(rib.nexthop(1).is_none());
    }
}
