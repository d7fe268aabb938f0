//! Issue 13, items 7 and 8: failover that does not wait for the kernel's
//! link watch, and port-channel addresses shown on the channel.
//!
//! The kernel sets `IFF_RUNNING` (and sends the `RTM_NEWLINK` event) from
//! its link-watch work, which runs a non-urgent event at most once a
//! second host-wide: after an unrelated port flapped, a veth whose peer
//! goes down — like a NIC whose cable is pulled — keeps `IFF_RUNNING` for
//! up to a second while its carrier (`IFF_LOWER_UP`) is already gone.
//! Each test flaps an unrelated port (t5) 300 ms before the failure, under
//! a constant stream, and counts what is lost:
//!
//! - a backup pair's primary (sw2) loses its far end: the stream moves
//!   to the backup (sw3);
//! - a static port channel (sw2 + sw3) loses member sw2: its flows rehash
//!   onto sw3. The addresses learned on the channel show as `po1` in
//!   `show mac address-table` (item 8), text and JSON.
//!
//! Each also reports when `IFF_RUNNING` of sw2 cleared (read by ioctl in
//! the switch's namespace, which leaves the link watch alone; an
//! rtnetlink `RTM_GETLINK` of the device, as Lanyard now sends, makes the
//! kernel run the device's pending link-watch event on the spot).
//! `LANYARD_I13_RATE` sets the stream's rate (default 50,000 frames/s).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use testkit::frame::{mac, mac_in, test_frame, Mac, BROADCAST};
use testkit::{l2, require_root, Netns, RawPort, Switch, TestBed};

const UPSTREAM: u32 = 512;
const DEFAULT_RATE: u64 = 50_000;

fn rate() -> u64 {
    std::env::var("LANYARD_I13_RATE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_RATE)
}

fn upstream(i: u32) -> Mac {
    mac_in(9, i)
}

/// When, after `t0`, `ifname` in `ns` lost `IFF_RUNNING` (SIOCGIFFLAGS
/// every 100 µs).
struct LagProbe {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<Option<Duration>>,
}

fn running(ifname: &str) -> Option<bool> {
    // SAFETY: plain socket(2); checked, closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    if fd < 0 {
        return None;
    }
    // SAFETY: ifreq is plain data; zeroed is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS fills the ifreq we pass; fd is ours.
    let r = unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) };
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(fd) };
    if r != 0 {
        return None;
    }
    // SAFETY: SIOCGIFFLAGS filled `ifru_flags`.
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    Some(flags & libc::IFF_RUNNING != 0)
}

impl LagProbe {
    fn start(
        ns: &Netns,
        ifname: &'static str,
        t0: Arc<std::sync::Mutex<Option<Instant>>>,
    ) -> LagProbe {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let name = ns.name().to_string();
        let handle = std::thread::spawn(move || {
            testkit::netns::in_netns(&name, move || {
                while !s.load(Ordering::Relaxed) {
                    let start = *t0.lock().unwrap();
                    if let (Some(start), Some(false)) = (start, running(ifname)) {
                        return Some(start.elapsed());
                    }
                    std::thread::sleep(Duration::from_micros(100));
                }
                None
            })
            .unwrap_or(None)
        });
        LagProbe { stop, handle }
    }

    fn finish(self) -> Option<Duration> {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap()
    }
}

/// Streams h1 → upstream addresses from t1 for 1.5 s; 200 ms in, flaps t5;
/// 300 ms later takes t2 down. Returns (sent, per-port received, kernel
/// lag of sw2's carrier and IFF_RUNNING).
fn stream_through_failure(bed: &TestBed, ports: &[RawPort]) -> (u64, Vec<u64>, String) {
    let rate = rate();
    let h1 = mac(1);
    for p in ports {
        p.drain();
    }
    let caps: Vec<_> = ports
        .iter()
        .map(|p| p.start_capture(0, |i, _| i.phase == 13).unwrap())
        .collect();
    let total = (rate * 3 / 2) as usize;
    let sender = ports[0].try_clone().unwrap();
    let tx = std::thread::spawn(move || {
        sender
            .send_paced(total, rate, |i, b| {
                *b = test_frame(&upstream(i as u32 % UPSTREAM), &h1, &[], 13, i as u64, 64)
            })
            .unwrap()
    });
    let t_down = Arc::new(std::sync::Mutex::new(None));
    let probe = LagProbe::start(&bed.dut, "sw2", t_down.clone());
    std::thread::sleep(Duration::from_millis(200));
    // The unrelated flap: the link watch runs for it and will hold the
    // next non-urgent event back for up to a second.
    bed.tester
        .exec(&["ip", "link", "set", "t5", "down"])
        .unwrap();
    bed.tester.exec(&["ip", "link", "set", "t5", "up"]).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    *t_down.lock().unwrap() = Some(Instant::now());
    bed.tester
        .exec(&["ip", "link", "set", "t2", "down"])
        .unwrap();
    let took = tx.join().unwrap();
    let counts: Vec<u64> = caps
        .into_iter()
        .map(|c| {
            c.wait_quiet(Duration::from_millis(300), Duration::from_secs(3));
            c.stop().unwrap().matched
        })
        .collect();
    let running = probe.finish();
    let lag = format!(
        "sent {total} in {:.2} s; sw2 IFF_RUNNING cleared {running:.1?} after `ip link set t2 down`",
        took.as_secs_f64()
    );
    (total as u64, counts, lag)
}

/// At 50,000 frames/s, 1 ms of traffic is 50 frames; frames that meet the
/// dead port wait in its transmit ring and leave by the port that takes
/// over, so a correct switch loses (almost) nothing. Before issue 13 this
/// lost the whole link-watch delay: hundreds of milliseconds.
fn loss_bound() -> u64 {
    (rate() / 1000).max(20)
}

#[test]
fn issue13_backup_pair_fails_over_without_waiting_for_link_watch() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("i13bp", 5, 1500).expect("namespaces");
    let yaml = "switch:\n  name: i13bp\nports:\n\
                \x20 - {name: sw1}\n  - {name: sw2}\n  - {name: sw3}\n  - {name: sw4}\n  - {name: sw5}\n\
                backup-pairs:\n  - {primary: sw2, backup: sw3}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3", "sw4", "sw5"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    let frames: Vec<Vec<u8>> = (0..UPSTREAM)
        .map(|i| test_frame(&BROADCAST, &upstream(i), &[], 1, i as u64, 64))
        .collect();
    l2::send_settled(&sw, &ports[1], "sw2", &frames);

    let (total, counts, lag) = stream_through_failure(&bed, &ports);
    let lost = total.saturating_sub(counts[1] + counts[2]);
    eprintln!(
        "backup pair: {lag}; primary {} backup {} flooded-to-sw4 {} lost {lost}",
        counts[1], counts[2], counts[3]
    );
    let p = sw.show_json(&["show", "backup-pairs"])[0].clone();
    assert_eq!(p["active"], "sw3", "{p}");
    assert!(counts[1] > 0 && counts[2] > 0, "{counts:?}");
    assert_eq!(counts[3], 0, "redirected, not flooded");
    assert!(
        lost <= loss_bound(),
        "lost {lost} frames (bound {}): failover waited for the link watch? {lag}",
        loss_bound()
    );
}

#[test]
fn issue13_channel_member_loss_without_waiting_for_link_watch() {
    require_root!();
    let _g = l2::heavy();
    let bed = TestBed::new("i13pc", 5, 1500).expect("namespaces");
    let yaml = "switch:\n  name: i13pc\nports:\n\
                \x20 - {name: sw1}\n  - {name: sw2}\n  - {name: sw3}\n  - {name: sw4}\n  - {name: sw5}\n\
                port-channels:\n  - {name: po1, members: [sw2, sw3], lacp: static, load-balance: l2}\n";
    let sw = Switch::start(
        &l2::bin(env!("CARGO_BIN_EXE_lanyard")),
        &bed.dut,
        yaml,
        &["sw1", "sw2", "sw3", "sw4", "sw5"],
    )
    .expect("start lanyard");
    let ports = bed.open_all().expect("tester sockets");
    let frames: Vec<Vec<u8>> = (0..UPSTREAM)
        .map(|i| test_frame(&BROADCAST, &upstream(i), &[], 1, i as u64, 64))
        .collect();
    l2::send_settled(&sw, &ports[1], "sw2", &frames);

    // Item 8: learned on the channel, shown on the channel.
    let rows = sw.mac_table(None);
    let on_channel: Vec<&serde_json::Value> = rows
        .iter()
        .filter(|r| r["mac"].as_str().is_some_and(|m| m.starts_with("02:09:")))
        .collect();
    assert_eq!(on_channel.len(), UPSTREAM as usize, "{rows:?}");
    assert!(
        on_channel.iter().all(|r| r["port"] == "po1"),
        "port of addresses learned on the channel: {:?}",
        on_channel.iter().find(|r| r["port"] != "po1")
    );
    let out = sw.cli(&["show", "mac", "address-table"]).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.contains("0209."))
        .unwrap_or_else(|| panic!("no channel address in:\n{text}"));
    assert!(line.contains("po1"), "{line}");

    let (total, counts, lag) = stream_through_failure(&bed, &ports);
    let lost = total.saturating_sub(counts[1] + counts[2]);
    eprintln!(
        "port channel: {lag}; sw2 {} sw3 {} flooded-to-sw4 {} lost {lost}",
        counts[1], counts[2], counts[3]
    );
    assert!(counts[1] > 0 && counts[2] > 0, "{counts:?}");
    assert_eq!(counts[3], 0, "rehashed, not flooded");
    assert!(
        lost <= loss_bound(),
        "lost {lost} frames (bound {}): member loss waited for the link watch? {lag}",
        loss_bound()
    );
}
