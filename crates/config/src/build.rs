//! Compile a validated configuration into table snapshots. The model is
//! what the operator wrote; the tables are what workers read.

use crate::{Config, PortMode as CfgMode};
use std::sync::Arc;
use tables::l2::{PortMode, TPID_8021Q};
use tables::{L2Tables, LearnGate, MacTable, PortEntry, Tables, VlanSet};

/// The layer-2 tables of `cfg`, every port down (ports come up as the
/// supervisor attaches them).
pub fn l2_tables(cfg: &Config) -> L2Tables {
    let existing = cfg.vlan_ids();
    let peer_link_ports = cfg.peer_link_ports();
    let ports: Vec<PortEntry> = cfg
        .ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if cfg.is_monitor_port(i) || cfg.is_inline_port(i) || cfg.is_pseudowire_port(i) {
                // A mirror destination: in no VLAN, never flooded to;
                // what it receives is dropped (unknown VLAN). An inline
                // port likewise: the worker passes its frames to its pair
                // before the layer-2 stage (datapath::inline). An
                // attachment circuit's port too (datapath::pseudowire).
                let mut e = PortEntry::new(PortMode::Access, 0, &[], TPID_8021Q);
                e.learning = false;
                e.up = false;
                return e;
            }
            let mut vlans = VlanSet::default();
            let (mode, pvid, tpid) = match p.mode {
                CfgMode::Access => (
                    PortMode::Access,
                    p.effective_vlan().unwrap_or(1),
                    TPID_8021Q,
                ),
                CfgMode::Dot1qTunnel => (
                    PortMode::Tunnel,
                    p.effective_vlan().unwrap_or(1),
                    TPID_8021Q,
                ),
                CfgMode::Trunk => (
                    PortMode::Trunk,
                    p.effective_native_vlan().and_then(|n| n.id()).unwrap_or(0),
                    p.effective_tpid().map(|t| t.value()).unwrap_or(TPID_8021Q),
                ),
                // Never seen by the layer-2 stage (the worker routes its
                // frames); in no VLAN, so never in a flood set.
                CfgMode::Routed => (PortMode::Access, 0, TPID_8021Q),
            };
            match (&p.mode, &p.allowed_vlans) {
                // An explicit allowed list is kept as written, so a frame in
                // an allowed but unconfigured VLAN counts as unknown-vlan.
                (CfgMode::Trunk, Some(list)) => list.iter().for_each(|v| vlans.insert(v)),
                (CfgMode::Trunk, None) => existing.iter().for_each(|v| vlans.insert(v)),
                (CfgMode::Routed, _) => {}
                _ => vlans.insert(pvid),
            }
            if mode == PortMode::Trunk && pvid != 0 {
                vlans.insert(pvid);
            }
            // Virtual-switch peer-link ports learn nothing: the peer's
            // addresses come from the peer protocol, bound to channels.
            // (An aggregated peer link's channel port is cloned from its
            // first member below, so it carries the same flags.)
            let peer_link = peer_link_ports.contains(&p.name);
            PortEntry {
                mode,
                pvid,
                tpid,
                vlans,
                learning: p.learning && !peer_link,
                peer_link,
                mac_limit: p.mac_limit.unwrap_or(0),
                up: false,
                logical: tables::l2::SELF,
                blocked: false,
                egress: tables::l2::Egress::Direct,
                stp: tables::l2::StpState::Off,
            }
        })
        .collect();
    // Each VLAN interface is the VLAN's access port to the router (an
    // internal port id after the configured ports): frames to the router
    // MAC are switched to it, frames from the router enter the VLAN on it.
    let mut ports: Vec<PortEntry> = ports;
    for (v, _) in cfg.svis() {
        let mut e = PortEntry::new(PortMode::Access, v.id, &[v.id], TPID_8021Q);
        e.learning = false;
        ports.push(e);
    }
    // Port channels: a port id each after the SVIs, with their members'
    // (identical) VLAN settings; members enter the layer-2 stage as the
    // channel and stay blocked until they distribute (crate::ha).
    for (k, c) in cfg.port_channels.iter().enumerate() {
        let id = cfg.channel_port_id(k);
        let first = c.members.first().and_then(|m| cfg.port_index(m));
        let mut e = match first {
            Some(i) => ports[i].clone(),
            None => PortEntry::new(PortMode::Access, 0, &[], TPID_8021Q),
        };
        e.up = false;
        e.egress = tables::l2::Egress::Channel(k as u8);
        ports.push(e);
        for m in c.members.iter().filter_map(|m| cfg.port_index(m)) {
            ports[m].logical = id;
            ports[m].blocked = true;
        }
    }
    // Backup pairs start on the primary; the backup is standby.
    for b in &cfg.backup_pairs {
        if let (Some(p), Some(s)) = (cfg.port_index(&b.primary), cfg.port_index(&b.backup)) {
            ports[s].blocked = true;
            ports[s].egress = tables::l2::Egress::Via(p as u16);
        }
    }
    // Spanning tree ports start discarding: nothing forwards until the
    // spanning tree thread has decided (no loop while it starts).
    for (i, _) in cfg.stp_ports() {
        ports[i].stp = tables::l2::StpState::Discarding;
    }
    let vlan_flags: Vec<(u16, bool, u32)> = existing
        .iter()
        .filter_map(|id| cfg.vlan_settings(id))
        .map(|v| (v.id, v.learning, v.mac_limit.unwrap_or(0)))
        .collect();
    L2Tables::new(ports, &vlan_flags)
}

/// The first snapshot of a switch.
pub fn initial_tables(cfg: &Config) -> Tables {
    Tables {
        l2: l2_tables(cfg),
        mac: Arc::new(MacTable::new(cfg.switch.mac_table_size as usize)),
        learn_gate: Arc::new(LearnGate::default()),
    }
}

/// Where mirrored copies go (`mirror-sessions`); `None` without sessions.
pub fn mirror_table(cfg: &Config) -> Option<tables::mirror::MirrorTable> {
    if cfg.mirror_sessions.is_empty() {
        return None;
    }
    let mut t = tables::mirror::MirrorTable::new(cfg.port_ids());
    for s in &cfg.mirror_sessions {
        let Some(d) = cfg.port_index(&s.destination) else {
            continue;
        };
        let d = d as u16;
        t.monitors.insert(d);
        for p in s.source_ports.iter().filter_map(|n| cfg.port_index(n)) {
            if s.direction.rx() {
                t.rx_port[p].insert(d);
            }
            if s.direction.tx() {
                t.tx_port[p].insert(d);
            }
        }
        for v in &s.source_vlans {
            if s.direction.rx() {
                t.rx_vlan[*v as usize].insert(d);
            }
            if s.direction.tx() {
                t.tx_vlan[*v as usize].insert(d);
            }
        }
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    #[test]
    fn compiles_modes_and_membership() {
        let cfg = parse(
            r#"
vlans:
  - id: 10
    mac-limit: 5
  - id: 20
    learning: false
ports:
  - name: a
    vlan: 10
  - name: b
    mode: trunk
    allowed-vlans: "10,30"
    native-vlan: none
    tpid: 0x88a8
  - name: c
    mode: dot1q-tunnel
    vlan: 20
"#,
            "t.yaml",
        )
        .expect("valid");
        let t = l2_tables(&cfg);
        assert_eq!(t.ports[0].mode, PortMode::Access);
        assert_eq!(t.ports[0].pvid, 10);
        assert_eq!(t.ports[1].pvid, 0);
        assert_eq!(t.ports[1].tpid, 0x88a8);
        assert!(t.ports[1].vlans.contains(30) && !t.ports[1].vlans.contains(20));
        assert_eq!(t.ports[2].mode, PortMode::Tunnel);
        assert_eq!(t.vlans[10].members.iter().collect::<Vec<_>>(), vec![0, 1]);
        assert_eq!(t.vlans[10].mac_limit, 5);
        assert!(!t.vlans[20].learning && t.vlans[1].configured);
        assert!(!t.vlans[30].configured);
    }
}
