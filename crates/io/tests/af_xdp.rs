//! AF_XDP port tests on veth pairs inside throwaway network namespaces:
//! real frames both ways (native and generic XDP), jumbo frames through
//! multi-buffer XDP, re-attach after the interface is re-created, the
//! steering program removed on drop and a stale one replaced. They need
//! root; without it they print a note and pass.

use io::af_xdp::prog::{self, XdpMode};
use io::{link, AfPacketOptions, AfPacketPort, AfXdpOptions, AfXdpPort, FrameBatch, Port};
use std::time::{Duration, Instant};

mod common;
use common::{wait_oper_up, Netns};

const MARK: [u8; 2] = [0x88, 0xb5];

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    v[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    v[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    v[12..14].copy_from_slice(&MARK);
    v[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in v[18..].iter_mut().enumerate() {
        *b = (seq as usize * 31 + i) as u8;
    }
    v
}

fn with_veth(mtu: u32) -> Option<Netns> {
    let ns = Netns::new("lyxd")?;
    ns.veth("a", "b", mtu);
    ns.enter(|| {
        wait_oper_up("a");
        wait_oper_up("b");
    });
    Some(ns)
}

fn poll_in(fd: i32, ms: i32) {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    unsafe { libc::poll(&mut pfd, 1, ms) };
}

/// Receive marked frames on `p` until `want` or `timeout`.
fn recv_marked(p: &mut dyn Port, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    let mut b = FrameBatch::new();
    let t = Instant::now();
    while got.len() < want && t.elapsed() < timeout {
        b.clear();
        if p.recv(&mut b, 0).unwrap() == 0 {
            poll_in(p.rx_fd().unwrap(), 5);
        }
        for i in 0..b.len() {
            let f = b.frame(i);
            if f.len() >= 14 && f[12..14] == MARK {
                got.push(f.to_vec());
            }
        }
    }
    got
}

/// Send `frames` on `p`, flushing every 64.
fn send_all(p: &mut dyn Port, frames: &[Vec<u8>]) {
    for (i, f) in frames.iter().enumerate() {
        let t = Instant::now();
        while !p.send(f) {
            let _ = p.flush();
            assert!(t.elapsed() < Duration::from_secs(5), "tx ring stuck");
            std::thread::sleep(Duration::from_micros(50));
        }
        if i % 64 == 63 {
            let _ = p.flush();
        }
    }
    let _ = p.flush();
}

fn xdp_on(name: &str) -> Option<prog::Attached> {
    let idx = link::query(name)?.ifindex;
    prog::attached(idx).unwrap()
}

/// The program on `name` once it is gone, or what is still there after a
/// second. A link's program is detached when the last descriptor of the
/// link closes; another test of this binary forking a child at that
/// moment holds a copy until the child's `exec` closes it (the
/// descriptors are close-on-exec), so the detach can come a little after
/// the port is dropped (1 failure in ~12 runs under load, before).
fn xdp_gone(name: &str) -> Option<prog::Attached> {
    let t0 = std::time::Instant::now();
    loop {
        let now = xdp_on(name);
        if now.is_none() || t0.elapsed() > Duration::from_secs(1) {
            return now;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Frames both ways between an AF_XDP port on `a` and an AF_PACKET port on
/// `b`, every byte checked.
fn exchange(mode: XdpMode, mtu: u32, lens: &[usize]) {
    let Some(ns) = with_veth(mtu) else { return };
    ns.enter(|| {
        let opts = AfXdpOptions {
            mode: Some(mode),
            ..AfXdpOptions::default()
        };
        let mut x = AfXdpPort::open("a", &opts).expect("AF_XDP open");
        assert_eq!(x.mode().xdp, mode);
        let a = xdp_on("a").expect("program attached");
        assert_eq!(a.name, prog::PROG_NAME);
        // A receive ring that holds every test frame (2,000 jumbo frames
        // arrive faster than the test reads them).
        let big = AfPacketOptions {
            rx_blocks: 128,
            ..AfPacketOptions::default()
        };
        let mut p = AfPacketPort::open("b", &big).unwrap();
        let frames: Vec<Vec<u8>> = (0..2000u32)
            .map(|i| frame(i, lens[i as usize % lens.len()]))
            .collect();
        // b -> a: AF_XDP receive.
        send_all(&mut p, &frames);
        let got = recv_marked(&mut x, frames.len(), Duration::from_secs(5));
        let missing: std::collections::BTreeSet<usize> = frames
            .iter()
            .filter(|f| !got.contains(f))
            .map(|f| f.len())
            .collect();
        assert_eq!(
            got.len(),
            frames.len(),
            "received by AF_XDP; lengths missing {missing:?}, {:?}",
            x.stats()
        );
        assert!(got == frames, "frames arrive intact and in order");
        // a -> b: AF_XDP transmit.
        send_all(&mut x, &frames);
        let got = recv_marked(&mut p, frames.len(), Duration::from_secs(5));
        let missing: std::collections::BTreeSet<usize> = frames
            .iter()
            .filter(|f| !got.contains(f))
            .map(|f| f.len())
            .collect();
        assert_eq!(
            got.len(),
            frames.len(),
            "sent by AF_XDP; lengths missing {missing:?}, {:?} / {:?}",
            x.stats(),
            p.stats()
        );
        assert!(got == frames, "frames leave intact and in order");
        let st = x.stats();
        assert_eq!((st.rx_ring_drops, st.tx_errors), (0, 0), "{st:?}");
        drop(x);
        // The link's last descriptor is closed; the kernel may finish the
        // detach a moment later when the machine is busy.
        let until = std::time::Instant::now() + Duration::from_secs(2);
        while xdp_on("a").is_some() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(xdp_gone("a"), None, "program removed when the port closes");
    });
}

#[test]
fn native_xdp_frames_both_ways() {
    exchange(XdpMode::Native, 1500, &[60, 64, 128, 1000, 1514]);
}

#[test]
fn generic_xdp_frames_both_ways() {
    exchange(XdpMode::Generic, 1500, &[60, 64, 128, 1000, 1514]);
}

#[test]
fn jumbo_frames_through_multi_buffer_native_xdp() {
    exchange(
        XdpMode::Native,
        9216,
        &[60, 3000, 4000, 8192, io::MAX_FRAME_LEN],
    );
}

/// `TcpExt: BusyPollRxPackets` of this thread's namespace: frames the
/// kernel's busy poll (`napi_busy_loop`) took.
fn busy_poll_rx_packets() -> Option<u64> {
    let t = std::fs::read_to_string("/proc/thread-self/net/netstat").ok()?;
    let mut lines = t.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (lines.next()?, lines.next()?);
    let i = names
        .split_whitespace()
        .position(|n| n == "BusyPollRxPackets")?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// Busy polling asked on a veth (copy mode): the kernel gives the socket
/// no NAPI id (Linux 6.13+ marks only zero-copy sockets, at bind), so the
/// port says so, leaves the device alone, does not kick, and receives as
/// without busy polling. Should a kernel give the id later, the port
/// busy polls instead: either way, consistent and receiving.
#[test]
fn busy_poll_on_a_veth_is_refused_for_want_of_a_napi_id_and_frames_still_flow() {
    let Some(ns) = with_veth(1500) else { return };
    ns.enter(|| {
        let opts = AfXdpOptions {
            busy_poll: Some(io::af_xdp::BusyPoll::default()),
            ..AfXdpOptions::default()
        };
        let mut x = AfXdpPort::open("a", &opts).expect("AF_XDP open");
        let refused = x.busy_poll_refused().expect("busy polling asked").to_vec();
        let mut p = AfPacketPort::open("b", &AfPacketOptions::default()).unwrap();
        let busy_before = busy_poll_rx_packets();
        for round in 0..3u32 {
            let frames: Vec<Vec<u8>> = (0..500u32).map(|i| frame(round * 500 + i, 64)).collect();
            send_all(&mut p, &frames);
            // Kicks by hand too (the port does not, without an id): what
            // the kernel busy polls shows in BusyPollRxPackets.
            for _ in 0..100 {
                // SAFETY: a zero-length non-blocking receive, no buffer.
                unsafe {
                    libc::recvfrom(
                        x.rx_fd().unwrap(),
                        std::ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
            }
            let got = recv_marked(&mut x, frames.len(), Duration::from_secs(5));
            assert!(got == frames, "round {round}: {} of 500", got.len());
            let _ = x.stats();
        }
        let id = x.napi_id();
        let busy = busy_poll_rx_packets().zip(busy_before).map(|(a, b)| a - b);
        eprintln!(
            "veth XSK after 1,500 frames and 300 kicks: NAPI id {id}, \
             BusyPollRxPackets +{busy:?}, refused {refused:?}"
        );
        if id == 0 {
            assert!(
                refused.iter().any(|r| r.starts_with("no NAPI id")),
                "{refused:?}"
            );
            assert!(!x.busy_polling());
            assert_eq!(x.busy_poll_spin(), None, "the device was left alone");
        } else {
            assert!(x.busy_polling(), "an id, so recv busy polls");
        }
    });
}

#[test]
fn auto_mode_prefers_native_on_veth() {
    let Some(ns) = with_veth(9216) else { return };
    ns.enter(|| {
        let x = AfXdpPort::open("a", &AfXdpOptions::default()).unwrap();
        assert_eq!(x.mode().xdp, XdpMode::Native);
        assert!(!x.mode().zero_copy, "veth has no zero-copy");
        assert!(x.mode().multi_buffer);
        assert_eq!(x.mode().to_string(), "native/copy");
    });
}

#[test]
fn stale_program_of_a_crashed_run_is_replaced() {
    let Some(ns) = with_veth(1500) else { return };
    ns.enter(|| {
        let idx = link::query("a").unwrap().ifindex;
        // What a crashed run that attached the netlink way leaves: our
        // program, attached with nothing holding it.
        let map = prog::create_xskmap(1).unwrap();
        let p = prog::load_program(&map, true).unwrap();
        prog::netlink_set(idx, Some(&p), prog::XDP_FLAGS_DRV_MODE).unwrap();
        drop((p, map));
        let stale = xdp_on("a").expect("stale program attached");
        assert_eq!(stale.name, prog::PROG_NAME);
        let mut x = AfXdpPort::open("a", &AfXdpOptions::default()).expect("replaces it");
        let now = xdp_on("a").unwrap();
        assert_ne!(now.prog_id, stale.prog_id, "a new program");
        // And it works: frames arrive.
        let mut p = AfPacketPort::open("b", &AfPacketOptions::default()).unwrap();
        send_all(&mut p, &[frame(1, 60), frame(2, 60)]);
        assert_eq!(recv_marked(&mut x, 2, Duration::from_secs(3)).len(), 2);
        drop(x);
        assert_eq!(xdp_gone("a"), None, "nothing left behind");
    });
}

#[test]
fn someone_elses_program_is_left_alone() {
    let Some(ns) = with_veth(1500) else { return };
    ns.enter(|| {
        let idx = link::query("a").unwrap().ifindex;
        // A live link held by another "process" (here: this one).
        let map = prog::create_xskmap(1).unwrap();
        let p = prog::load_program(&map, true).unwrap();
        let held = prog::link_attach(&p, idx, XdpMode::Native).unwrap();
        let e = AfXdpPort::open("a", &AfXdpOptions::default());
        assert!(e.is_err(), "a live link is not taken over");
        assert!(xdp_on("a").is_some());
        drop(held);
        assert_eq!(xdp_gone("a"), None);
    });
}

/// Not a test on its own: the process `killed_process_leaves_no_program`
/// starts (an exec'd copy of this binary, so it shares no descriptor with
/// the other tests) to hold a port until it is killed.
#[test]
#[ignore]
fn child_holds_a_port() {
    if std::env::var_os("LYXD_CHILD").is_none() {
        return;
    }
    let _x = AfXdpPort::open("a", &AfXdpOptions::default()).expect("child open");
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn killed_process_leaves_no_program() {
    let Some(ns) = with_veth(1500) else { return };
    let exe = std::env::current_exe().unwrap();
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(&exe)
        .args(["--ignored", "--exact", "child_holds_a_port", "--nocapture"])
        .env("LYXD_CHILD", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn child");
    ns.enter(|| {
        let t = Instant::now();
        while xdp_on("a").is_none() && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    let attached = ns.enter(|| xdp_on("a"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(attached.is_some(), "child attached");
    ns.enter(|| {
        let t = Instant::now();
        while xdp_on("a").is_some() && t.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(
            xdp_gone("a"),
            None,
            "the kernel detached it with the process"
        );
        // And a new port attaches.
        AfXdpPort::open("a", &AfXdpOptions::default()).expect("re-attach");
    });
}

#[test]
fn reattach_after_the_interface_is_recreated() {
    let Some(ns) = with_veth(1500) else { return };
    let x = ns.enter(|| AfXdpPort::open("a", &AfXdpOptions::default()).unwrap());
    ns.ip(&["link", "del", "dev", "a"]);
    drop(x); // its interface is gone: dropping must not fail
    ns.veth("a", "b", 1500);
    ns.enter(|| {
        wait_oper_up("a");
        wait_oper_up("b");
        let mut x = AfXdpPort::open("a", &AfXdpOptions::default()).unwrap();
        let mut p = AfPacketPort::open("b", &AfPacketOptions::default()).unwrap();
        send_all(&mut p, &[frame(7, 100)]);
        assert_eq!(recv_marked(&mut x, 1, Duration::from_secs(3)).len(), 1);
    });
}

#[test]
fn link_flap_keeps_the_port_working_and_discard_drops_stale_frames() {
    let Some(ns) = with_veth(1500) else { return };
    ns.enter(|| {
        let mut x = AfXdpPort::open("a", &AfXdpOptions::default()).unwrap();
        let mut p = AfPacketPort::open("b", &AfPacketOptions::default()).unwrap();
        link::set_down("a").unwrap();
        // Queued while down: not sent (ENETDOWN), then discarded.
        assert!(x.send(&frame(99, 60)));
        assert!(x.flush().is_err(), "flush on a down port says so");
        x.discard_tx();
        link::set_up("a").unwrap();
        wait_oper_up("a");
        wait_oper_up("b");
        send_all(&mut x, &[frame(1, 60)]);
        let got = recv_marked(&mut p, 2, Duration::from_millis(500));
        assert_eq!(got, vec![frame(1, 60)], "the stale frame never leaves");
        send_all(&mut p, &[frame(2, 60)]);
        assert_eq!(recv_marked(&mut x, 1, Duration::from_secs(3)).len(), 1);
    });
}

/// An IPv4/UDP frame from source port `sport` carrying `seq` (the sender's
/// flow hash picks the veth queue, so ports spread frames over queues).
fn udp_frame(seq: u32, sport: u16) -> Vec<u8> {
    let mut v = vec![0u8; 64];
    v[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    v[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    v[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut v[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 9, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 9, 0, 2]);
    let mut sum = 0u32;
    for w in ip.chunks(2) {
        sum += u16::from_be_bytes([w[0], w[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut v[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&9999u16.to_be_bytes());
    udp[4..6].copy_from_slice(&30u16.to_be_bytes());
    // Checksum 0: none (IPv4).
    v[42..46].copy_from_slice(&seq.to_be_bytes());
    v
}

/// A veth with four receive queues gets a socket on each, and frames of
/// many flows (spread over the queues by the sender's flow hash) all
/// arrive, on more than one queue; transmit still works.
#[test]
fn multi_queue_veth_opens_a_socket_per_queue() {
    let Some(ns) = Netns::new("lyxq") else { return };
    let q = ["numrxqueues", "4", "numtxqueues", "4"];
    for (x, y) in [("a", "b"), ("c", "d")] {
        let mut args = vec!["link", "add", "name", x];
        args.extend_from_slice(&q);
        args.extend_from_slice(&["type", "veth", "peer", "name", y]);
        args.extend_from_slice(&q);
        ns.ip(&args);
        ns.ip(&["link", "set", "dev", x, "up"]);
        ns.ip(&["link", "set", "dev", y, "up"]);
    }
    ns.enter(|| {
        for d in ["a", "b", "c", "d"] {
            wait_oper_up(d);
        }
        let idx = link::query("a").unwrap().ifindex;
        assert_eq!(io::af_xdp::rx_queues("a", idx), 4);
        let mut x = AfXdpPort::open("a", &AfXdpOptions::default()).expect("AF_XDP open");
        assert_eq!(x.queues(), 4);
        // The receive chunks are split: 16,384 / 4 per queue.
        assert_eq!(x.rings().0, 4096);
        // Through the qdisc layer: the flow hash picks the transmit queue,
        // which is the receive queue at the peer (a bypassing socket picks
        // by CPU).
        let tx = AfPacketOptions {
            qdisc_bypass: false,
            ..AfPacketOptions::default()
        };
        let mut p = AfPacketPort::open("b", &tx).unwrap();
        let frames: Vec<Vec<u8>> = (0..400u32).map(|i| udp_frame(i, 1000 + i as u16)).collect();
        spread_over_queues(&mut x, &mut p, &frames);
        // a -> b still works (queue 0's socket transmits).
        let back: Vec<Vec<u8>> = (0..50).map(|i| frame(i, 100)).collect();
        send_all(&mut x, &back);
        let got = recv_marked(&mut p, back.len(), Duration::from_secs(5));
        assert_eq!(got.len(), back.len());
        assert_eq!(x.stats().rx_ring_drops, 0);
        // Restart hand-over carries every queue's socket: the successor
        // (here, the same process) reads all four again.
        let state = x.handover().expect("hand-over state");
        assert_eq!(state.matches('+').count(), 3, "{state}");
        std::mem::forget(x); // handed over: neither used nor dropped
        let mut y = AfXdpPort::adopt("a", &state).expect("adopt");
        assert_eq!(y.queues(), 4);
        spread_over_queues(&mut y, &mut p, &frames);
        send_all(&mut y, &back);
        assert_eq!(
            recv_marked(&mut p, back.len(), Duration::from_secs(5)).len(),
            50
        );
        // Busy polling is refused on a multi-queue port, saying why; the
        // port still opens and reads every queue. (Another pair: the
        // handed-over sockets stay open while `x`'s forgotten rings map
        // them.)
        let mut p = AfPacketPort::open("d", &tx).unwrap();
        let busy = AfXdpOptions {
            busy_poll: Some(io::af_xdp::BusyPoll::default()),
            ..AfXdpOptions::default()
        };
        let mut z = AfXdpPort::open("c", &busy).expect("open with busy polling asked");
        let refused = z.busy_poll_refused().expect("asked").to_vec();
        assert!(
            refused.iter().any(|r| r.contains("4 receive queues")),
            "{refused:?}"
        );
        assert!(!z.busy_polling());
        spread_over_queues(&mut z, &mut p, &frames);
    });
}

/// Send `frames` (UDP, see `udp_frame`) on `p`; all arrive on `x`, more
/// than one of its queues used.
fn spread_over_queues(x: &mut AfXdpPort, p: &mut AfPacketPort, frames: &[Vec<u8>]) {
    let before = x.queue_rx_frames().to_vec();
    send_all(p, frames);
    let mut seen = std::collections::BTreeSet::new();
    let mut b = FrameBatch::new();
    let t = Instant::now();
    while seen.len() < frames.len() && t.elapsed() < Duration::from_secs(5) {
        b.clear();
        if x.recv(&mut b, 0).unwrap() == 0 {
            // The port's one descriptor wakes for any queue.
            poll_in(x.rx_fd().unwrap(), 5);
        }
        for i in 0..b.len() {
            let f = b.frame(i);
            if f.len() >= 46 && f[12..14] == [0x08, 0x00] && f[36..38] == [0x27, 0x0f] {
                seen.insert(u32::from_be_bytes([f[42], f[43], f[44], f[45]]));
            }
        }
    }
    let per_q: Vec<u64> = x
        .queue_rx_frames()
        .iter()
        .zip(&before)
        .map(|(a, b)| a - b)
        .collect();
    eprintln!("frames per queue: {per_q:?}");
    assert_eq!(
        seen.len(),
        frames.len(),
        "all frames arrive; per queue {per_q:?}"
    );
    let used = per_q.iter().filter(|&&n| n > 0).count();
    assert!(used > 1, "frames spread over queues: {per_q:?}");
}
