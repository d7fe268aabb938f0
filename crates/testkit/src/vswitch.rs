//! What the two-node virtual-switch tests share: the wiring between the
//! nodes (peer link and keepalive), the `virtual-switch:` section, and
//! waiting for the pair to form.

use crate::netns::{veth, Netns};
use crate::switch::Switch;
use std::io;
use std::time::{Duration, Instant};

/// Keepalive addresses of node A and node B (on their `ka` veths).
pub const KEEPALIVE: [&str; 2] = ["192.0.2.1", "192.0.2.2"];

/// Connects nodes `a` and `b` by each peer-link port name in `peer_link`
/// (same name on both sides) and by a keepalive link `ka` carrying
/// [`KEEPALIVE`] /30 addresses.
pub fn link_nodes(a: &Netns, b: &Netns, peer_link: &[&str]) -> io::Result<()> {
    for p in peer_link {
        veth(a, p, b, p, 1500)?;
    }
    veth(a, "ka", b, "ka", 1500)?;
    for (ns, addr) in [(a, KEEPALIVE[0]), (b, KEEPALIVE[1])] {
        ns.exec(&["ip", "addr", "add", &format!("{addr}/30"), "dev", "ka"])?;
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
        .is_ok_and(|v| v["status"] == "paired")
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
