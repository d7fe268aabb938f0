//! What the two-node virtual-switch tests and the lab's `lanyard-pair`
//! DUT share: the wiring between the nodes (peer link and keepalive), the
//! `virtual-switch:` section, and whether the pair has formed.

use crate::netns::{ip, Netns};
use crate::switch::Switch;
use std::io;
use std::time::{Duration, Instant};

/// Keepalive addresses of node A and node B (on their `ka` veths).
pub const KEEPALIVE: [&str; 2] = ["192.0.2.1", "192.0.2.2"];

/// Connects nodes `a` and `b` by each peer-link port name in `peer_link`
/// (same name on both sides) and by a keepalive link `ka` carrying
/// [`KEEPALIVE`] /30 addresses.
pub fn link_nodes(a: &Netns, b: &Netns, peer_link: &[&str]) -> io::Result<()> {
    link_namespaces(a.name(), b.name(), peer_link, 1500)
}

/// [`link_nodes`] for namespaces known by name (the lab creates its own),
/// peer-link veths with MTU `mtu` (the keepalive link 1,500).
pub fn link_namespaces(a: &str, b: &str, peer_link: &[&str], mtu: u32) -> io::Result<()> {
    let mtu = mtu.to_string();
    let pairs = peer_link
        .iter()
        .map(|p| (*p, mtu.as_str()))
        .chain([("ka", "1500")]);
    for (p, m) in pairs {
        ip(&[
            "-n", a, "link", "add", "name", p, "mtu", m, "type", "veth", "peer", "name", p, "mtu",
            m, "netns", b,
        ])?;
        for ns in [a, b] {
            ip(&["-n", ns, "link", "set", "dev", p, "up"])?;
        }
    }
    for (ns, addr) in [(a, KEEPALIVE[0]), (b, KEEPALIVE[1])] {
        ip(&["-n", ns, "addr", "add", &format!("{addr}/30"), "dev", "ka"])?;
    }
    Ok(())
}

/// The `virtual-switch:` section of node `node` (0 = A, 1 = B, which has
/// the higher priority number): domain `domain` with system MAC
/// `02:00:00:00:<domain>:00`, the peer-link ports, keepalive every 100 ms
/// (500 ms timeout), `delay-restore-s`, port channel `po1` as channel 1
/// when `channel`, and `extra` lines (indented two spaces) appended.
pub fn section(
    domain: u8,
    node: usize,
    peer_link: &[&str],
    delay_restore_s: u32,
    channel: bool,
    extra: &str,
) -> String {
    let prio = if node == 0 { 100 } else { 200 };
    let (src, peer) = (KEEPALIVE[node % 2], KEEPALIVE[(node + 1) % 2]);
    let channels = if channel {
        "  channels: [{port-channel: po1, id: 1}]\n"
    } else {
        ""
    };
    format!(
        "virtual-switch:
  domain-id: {domain}
  priority: {prio}
  system-mac: 02:00:00:00:{domain:02x}:00
  peer-link: [{}]
  delay-restore-s: {delay_restore_s}
  keepalive: {{source: {src}, peer: {peer}, interval-ms: 100, timeout-ms: 500}}
{channels}{extra}",
        peer_link.join(", ")
    )
}

/// Whether `sw` says its pair is formed.
pub fn is_paired(sw: &Switch) -> bool {
    sw.try_show_json(&["show", "virtual-switch"])
        .is_ok_and(|v| paired(&v))
}

/// Whether a node's `show virtual-switch --json` says the pair is formed.
pub fn paired(v: &serde_json::Value) -> bool {
    v["status"] == "paired"
}

/// Whether a node's `show virtual-switch --json` says the pair is formed
/// and its multichassis members are up (past `delay-restore-s`).
pub fn paired_with_members(v: &serde_json::Value) -> bool {
    paired(v) && v["multichassis_members"] == "up"
}

/// Waits until every switch says `paired`; panics after `secs` seconds.
/// Returns how long it took.
pub fn wait_paired(switches: &[&Switch], secs: u64) -> Duration {
    let t0 = Instant::now();
    while !switches.iter().all(|s| is_paired(s)) {
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "the pair did not form in {secs} s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    t0.elapsed()
}
