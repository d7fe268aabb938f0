//! End to end with real FRR 8.4 on a kernel without MPLS: two routers in
//! namespaces (zebra with `dplane_fpm_nl` and the `zebra_lanyard.so`
//! module, ospfd, ldpd), an LDP session between them, an Ethernet
//! pseudowire signalled by targeted LDP. Checks that
//!
//! * zebra turned MPLS on and LDP's labels reach the FPM listener as label
//!   entries (swap toward the peer's label, PHP pop) and a labelled route
//!   (FTN push) — none of which stock zebra sends on this kernel;
//! * the pseudowire reaches the side channel with both labels, and a
//!   refusal there is reported back to ldpd (pseudowire down), the next
//!   acceptance brings it up (zebra retries every 30 s).
//!
//! Needs root, FRR and the module (`scripts/build-zebra-mpls.sh`, run by
//! `scripts/setup.sh`); `LANYARD_ZEBRA_MODULE` overrides its path.

use labelfeed::{decode_route, fpm_frames, netlink_messages, LabelMsg, PwMessage, PwOp};
use std::io::Read;
use std::net::{IpAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};
use testkit::frr::{Daemon, FrrConfig, FrrInstance, FrrOptions};
use testkit::netns::{in_netns, Netns};

const MODULE_DEFAULT: &str = "/usr/local/lib/lanyard/zebra_lanyard.so";

fn module() -> PathBuf {
    std::env::var_os("LANYARD_ZEBRA_MODULE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(MODULE_DEFAULT))
}

/// FPM server in the namespace: every label message, decoded.
fn fpm_listener(ns: &str) -> Receiver<LabelMsg> {
    let l = in_netns(ns, || TcpListener::bind("127.0.0.1:2620"))
        .unwrap()
        .unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let Ok((mut s, _)) = l.accept() else { return };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 65536];
        loop {
            let n = match s.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            buf.extend_from_slice(&chunk[..n]);
            let (msgs, used) = fpm_frames(&buf).expect("FPM framing");
            for m in msgs
                .into_iter()
                .flat_map(|f| netlink_messages(f).expect("netlink"))
            {
                match decode_route(m) {
                    Ok(Some(x)) => {
                        if tx.send(x).is_err() {
                            return;
                        }
                    }
                    Ok(None) => {}
                    Err(e) => panic!("undecodable FPM message: {e}"),
                }
            }
            buf.drain(..used);
        }
    });
    rx
}

/// The pseudowire side channel: a SOCK_SEQPACKET listener at `path` that
/// answers "ok" while `accept` is set, "err ..." otherwise, and forwards
/// every decoded message.
fn pw_listener(path: &str, accept: Arc<AtomicBool>) -> Receiver<PwMessage> {
    let _ = std::fs::remove_file(path);
    // SAFETY: plain socket/bind/listen calls with checked results; the
    // sockaddr is zeroed and filled within its bounds.
    let fd = unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0);
        let mut sa: libc::sockaddr_un = std::mem::zeroed();
        sa.sun_family = libc::AF_UNIX as u16;
        for (d, s) in sa.sun_path.iter_mut().zip(path.as_bytes()) {
            *d = *s as libc::c_char;
        }
        let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
        assert_eq!(
            libc::bind(fd, &sa as *const _ as *const libc::sockaddr, len),
            0
        );
        assert_eq!(libc::listen(fd, 4), 0);
        fd
    };
    // zebra runs as `frr`.
    let c = std::ffi::CString::new(path).unwrap();
    // SAFETY: chmod on a path we just created.
    unsafe { libc::chmod(c.as_ptr(), 0o777) };
    let (tx, rx): (Sender<PwMessage>, _) = channel();
    std::thread::spawn(move || loop {
        // SAFETY: accept on our listening socket.
        let conn = unsafe { libc::accept(fd, std::ptr::null_mut(), std::ptr::null_mut()) };
        if conn < 0 {
            return;
        }
        let mut buf = [0u8; 4096];
        loop {
            // SAFETY: recv into a buffer of the given size.
            let n = unsafe { libc::recv(conn, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                break;
            }
            let line = String::from_utf8_lossy(&buf[..n as usize]).into_owned();
            if line.contains("op=subscribe") {
                // The module's status connection: this listener serves one
                // connection at a time and has nothing to report, so it
                // declines (the module closes it and asks again later).
                let no: &[u8] = b"err no status here";
                // SAFETY: send from a live buffer.
                unsafe { libc::send(conn, no.as_ptr().cast(), no.len(), 0) };
                continue;
            }
            let m = PwMessage::parse(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
            let reply: &[u8] = if accept.load(Ordering::SeqCst) {
                b"ok"
            } else {
                b"err attachment circuit not ready"
            };
            // SAFETY: send from a live buffer.
            unsafe { libc::send(conn, reply.as_ptr().cast(), reply.len(), 0) };
            if tx.send(m).is_err() {
                break;
            }
        }
        // SAFETY: closing the accepted socket once.
        unsafe { libc::close(conn) };
    });
    rx
}

struct Router {
    ns: String,
    me: u8,
    peer: u8,
    link: String,
}

impl Router {
    fn configs(&self, extra_ospf: &str, extra_ldp_if: &str) -> FrrConfig {
        let (me, peer, link) = (self.me, self.peer, &self.link);
        FrrConfig {
            // Labels inline in the routes (RTA_ENCAP); the next-hop-object
            // form (NHA_ENCAP) is not decoded yet (docs/mpls.md).
            zebra: "fpm address 127.0.0.1\nno fpm use-next-hop-groups\n".into(),
            ospfd: format!(
                "router ospf\n ospf router-id 10.255.0.{me}\n network 10.0.12.0/30 area 0\n \
                 network 10.255.0.{me}/32 area 0\n{extra_ospf}!\ninterface {link}\n \
                 ip ospf network point-to-point\n ip ospf hello-interval 1\n \
                 ip ospf dead-interval 4\n"
            ),
            ldpd: format!(
                "mpls ldp\n router-id 10.255.0.{me}\n address-family ipv4\n  \
                 discovery transport-address 10.255.0.{me}\n  interface {link}\n{extra_ldp_if} \
                 exit-address-family\n!\nl2vpn CUST1 type vpls\n member interface ac1\n \
                 member pseudowire mpw1\n  neighbor lsr-id 10.255.0.{peer}\n  pw-id 100\n"
            ),
            ..FrrConfig::default()
        }
    }
}

fn wait_for<T>(what: &str, timeout: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + timeout;
    loop {
        if let Some(x) = f() {
            return x;
        }
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn ldp_labels_and_pseudowire_reach_lanyard() {
    testkit::require_frr!(&[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd]);
    let module = module();
    assert!(
        module.exists(),
        "{} missing: run scripts/build-zebra-mpls.sh",
        module.display()
    );
    let a = Netns::new("mplsA").unwrap();
    let b = Netns::new("mplsB").unwrap();
    testkit::netns::veth(&a, "a0", &b, "b0", 1500).unwrap();
    for (ns, me) in [(&a, 1), (&b, 2)] {
        let n = ns.name();
        let run = |args: &[&str]| ns.exec(args).unwrap();
        run(&[
            "ip", "link", "add", "ac1", "type", "veth", "peer", "name", "ac1p",
        ]);
        for l in ["lo", "ac1", "ac1p"] {
            run(&["ip", "link", "set", l, "up"]);
        }
        run(&[
            "ip",
            "addr",
            "add",
            &format!("10.255.0.{me}/32"),
            "dev",
            "lo",
        ]);
        let link = if me == 1 { "a0" } else { "b0" };
        run(&[
            "ip",
            "addr",
            "add",
            &format!("10.0.12.{me}/30"),
            "dev",
            link,
        ]);
        let _ = n;
    }
    // B also routes 192.0.2.0/24 onward (a kernel route it redistributes
    // into OSPF, via an LDP interface): B is not that FEC's egress, so LDP
    // gives it a real label, which A must swap to and push.
    b.exec(&[
        "ip", "link", "add", "b1", "type", "veth", "peer", "name", "b1p",
    ])
    .unwrap();
    b.exec(&["ip", "link", "set", "b1", "up"]).unwrap();
    b.exec(&["ip", "link", "set", "b1p", "up"]).unwrap();
    b.exec(&["ip", "addr", "add", "10.0.23.1/30", "dev", "b1"])
        .unwrap();
    b.exec(&["ip", "route", "add", "192.0.2.0/24", "via", "10.0.23.2"])
        .unwrap();

    let fpm = fpm_listener(a.name());
    let tmp_guard = testkit::TempDir::new("mpls");
    let tmp = tmp_guard.path().to_path_buf();
    let sock_a = tmp.join("a-pw.sock").to_string_lossy().into_owned();
    let sock_b = tmp.join("b-pw.sock").to_string_lossy().into_owned();
    let accept_a = Arc::new(AtomicBool::new(false));
    let pw_a = pw_listener(&sock_a, accept_a.clone());
    let pw_b = pw_listener(&sock_b, Arc::new(AtomicBool::new(true)));

    let start = |ns: &Netns, name: &str, r: &Router, sock: &str, extra: &str, ldp_if: &str| {
        let opts = FrrOptions {
            zebra_args: vec![
                "-M".into(),
                "dplane_fpm_nl".into(),
                "-M".into(),
                format!("{}:{sock}", module.display()),
            ],
            ..FrrOptions::default()
        };
        FrrInstance::start_with(
            ns.name(),
            name,
            &[Daemon::Zebra, Daemon::Ospfd, Daemon::Ldpd],
            &r.configs(extra, ldp_if),
            &opts,
        )
        .unwrap()
    };
    let ra = Router {
        ns: a.name().into(),
        me: 1,
        peer: 2,
        link: "a0".into(),
    };
    let rb = Router {
        ns: b.name().into(),
        me: 2,
        peer: 1,
        link: "b0".into(),
    };
    let fa = start(&a, "mplsA", &ra, &sock_a, "", "");
    // LDP on b1 too: a FEC whose next hop is outside the LDP network gets
    // implicit null (ldpd lde_fec_outside_mpls_network), one inside a label.
    let fb = start(
        &b,
        "mplsB",
        &rb,
        &sock_b,
        " redistribute kernel\n",
        "  interface b1\n",
    );
    let _ = (&ra.ns, &rb.ns);

    assert!(fa.vtysh(&["show mpls status"]).contains("enabled: yes"));

    // LDP session up.
    wait_for("LDP session", Duration::from_secs(60), || {
        let out = fa.vtysh(&["show mpls ldp neighbor"]);
        (out.contains("OPERATIONAL") && out.contains("10.255.0.2")).then_some(())
    });

    // Label entries and the labelled route over FPM.
    let gw: IpAddr = "10.0.12.2".parse().unwrap();
    let prefix: IpAddr = "192.0.2.0".parse().unwrap();
    let mut swap = None; // (in, out) for 192.0.2.0/24
    let mut php = None; // in-label popped toward B (B's loopback)
    let mut ftn = None; // labels pushed on 192.0.2.0/24
    let mut seen = Vec::new();
    wait_for("labels over FPM", Duration::from_secs(60), || {
        while let Ok(m) = fpm.try_recv() {
            seen.push(m.clone());
            match m {
                LabelMsg::LabelAdd(e) => {
                    let [p] = &e.paths[..] else { continue };
                    assert_eq!(p.via, Some(gw), "{e:?}");
                    assert_eq!(e.protocol, 193, "RTPROT_LDP");
                    match p.labels[..] {
                        [] => php = Some(e.in_label),
                        [out] => swap = Some((e.in_label, out)),
                        _ => panic!("{e:?}"),
                    }
                }
                LabelMsg::RouteAdd(r) if r.prefix == prefix && r.prefix_len == 24 => {
                    ftn = Some(r.paths[0].labels.clone());
                    assert_eq!(r.paths[0].via, Some(gw));
                }
                _ => {}
            }
        }
        (swap.is_some() && php.is_some() && ftn.is_some()).then_some(())
    });
    let (in_label, out_label) = swap.unwrap();
    assert!(
        out_label >= 16,
        "a real label from B, not a null: {out_label}"
    );
    assert_eq!(ftn.unwrap(), vec![out_label], "FTN pushes B's label");
    // Cross-check with zebra's own view and B's binding.
    let table = fa.vtysh(&["show mpls table"]);
    assert!(table.contains(&format!(" {in_label} ")), "{table}");
    assert!(table.contains(&out_label.to_string()), "{table}");
    assert!(table.contains(&php.unwrap().to_string()), "{table}");
    let binding = fb.vtysh(&["show mpls ldp binding"]);
    assert!(
        binding
            .lines()
            .any(|l| l.contains("192.0.2.0/24") && l.contains(&format!(" {out_label} "))),
        "B advertises {out_label} for 192.0.2.0/24: {binding}"
    );

    // Pseudowire: A's side channel refuses first → ldpd marks it down.
    let first = wait_for("pseudowire install on A", Duration::from_secs(60), || {
        pw_a.try_recv().ok().filter(|m| m.op == PwOp::Install)
    });
    assert_eq!(first.ifname, "mpw1");
    assert_eq!(first.pw_id, 100);
    assert_eq!(first.vpn.as_deref(), Some("CUST1"));
    assert_eq!(first.peer, "10.255.0.2".parse::<IpAddr>().unwrap());
    assert_eq!(first.pw_type, 5, "Ethernet (raw) by default");
    assert!(
        first.control_word,
        "ldpd includes the control word by default"
    );
    assert_eq!(first.next_hops.len(), 1);
    assert_eq!(first.next_hops[0].gateway, Some(gw));
    let on_b = wait_for("pseudowire install on B", Duration::from_secs(60), || {
        pw_b.try_recv().ok().filter(|m| m.op == PwOp::Install)
    });
    assert_eq!(on_b.local_label, first.remote_label);
    assert_eq!(on_b.remote_label, first.local_label);
    std::thread::sleep(Duration::from_secs(2));
    let vc = fa.vtysh(&["show mpls pseudowires"]);
    assert!(
        vc.lines()
            .any(|l| l.starts_with("mpw1") && !l.contains(" UP")),
        "refused install must leave the pseudowire down: {vc}"
    );
    // Now accept: zebra's retry (30 s) brings it up, and ldpd agrees.
    accept_a.store(true, Ordering::SeqCst);
    wait_for("pseudowire up after retry", Duration::from_secs(60), || {
        let z = fa.vtysh(&["show mpls pseudowires"]);
        let l = fa.vtysh(&["show l2vpn atom vc"]);
        (z.lines()
            .any(|x| x.starts_with("mpw1") && x.contains(" UP"))
            && l.lines().any(|x| x.starts_with("mpw1") && x.contains("UP")))
        .then_some(())
    });
    drop(fa);
    drop(fb);
}
