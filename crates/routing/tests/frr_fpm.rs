//! End-to-end: a real zebra (with `-M dplane_fpm_nl`) and staticd in a
//! private network namespace send their routes to our FpmServer listening
//! on 127.0.0.1:2620 inside that namespace.
//!
//! Needs root and FRR (`/usr/lib/frr/zebra`); without them it prints
//! SKIPPED and passes. The daemons run as the `frr` user that Debian's
//! package creates (running them as root fails: "user(root) is not part of
//! vty group specified(frrvty)"), with every path pointed at a temp dir so
//! nothing under /etc/frr or /var/run/frr is touched.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::IpAddr;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use routing::frr::{FpmEvent, FpmHandle, FpmServer, NextHops, Prefix, Rib, RouteUpdate};

const ZEBRA: &str = "/usr/lib/frr/zebra";
const STATICD: &str = "/usr/lib/frr/staticd";
/// zebra's protocol number for static routes (RTPROT_ZSTATIC).
const PROTO_STATIC: u8 = 196;

fn run(cmd: &[&str]) -> Result<String, String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("{cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Namespace, temp dir and daemons; all cleaned up on drop, with the
/// daemons' logs printed if the test is failing.
struct Lab {
    ns: String,
    dir: PathBuf,
    daemons: Vec<Child>,
}

impl Lab {
    fn new() -> Result<Lab, String> {
        let uniq = format!(
            "{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        );
        let ns = format!("lyfrr-{uniq}");
        run(&["ip", "netns", "add", &ns])?;
        let dir = std::env::temp_dir().join(format!("lanyard-frr-{uniq}"));
        let lab = Lab {
            ns,
            dir,
            daemons: Vec::new(),
        };
        std::fs::create_dir_all(&lab.dir).map_err(|e| e.to_string())?;
        let ns = lab.ns.as_str();
        run(&["ip", "-n", ns, "link", "set", "lo", "up"])?;
        // A veth pair (the dummy driver is not always available).
        run(&[
            "ip", "-n", ns, "link", "add", "v0", "type", "veth", "peer", "name", "v1",
        ])?;
        run(&["ip", "-n", ns, "link", "set", "v0", "up"])?;
        run(&["ip", "-n", ns, "link", "set", "v1", "up"])?;
        run(&["ip", "-n", ns, "addr", "add", "192.0.2.10/24", "dev", "v0"])?;
        run(&[
            "ip",
            "-n",
            ns,
            "addr",
            "add",
            "2001:db8::10/64",
            "dev",
            "v0",
            "nodad",
        ])?;
        Ok(lab)
    }

    fn ifindex(&self, dev: &str) -> u32 {
        let out = run(&[
            "ip",
            "netns",
            "exec",
            &self.ns,
            "cat",
            &format!("/sys/class/net/{dev}/ifindex"),
        ])
        .unwrap();
        out.trim().parse().unwrap()
    }

    /// Binds the FPM server inside the namespace: a socket belongs to the
    /// namespace of the thread that creates it.
    fn bind_fpm(&self) -> (FpmHandle, Receiver<FpmEvent>) {
        let path = format!("/var/run/netns/{}", self.ns);
        std::thread::spawn(move || {
            let f = File::open(&path).expect("open netns");
            // SAFETY: plain syscall on a valid fd; affects this thread only.
            let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns: {}", std::io::Error::last_os_error());
            FpmServer::bind("127.0.0.1:2620")
                .expect("bind FPM in netns")
                .spawn_channel()
                .expect("spawn FPM")
        })
        .join()
        .unwrap()
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    fn start(&mut self, bin: &str, name: &str, extra: &[&str]) {
        let d = self.dir.to_str().unwrap().to_string();
        let mut args: Vec<String> = vec![
            "netns".into(),
            "exec".into(),
            self.ns.clone(),
            bin.into(),
            "-f".into(),
            format!("{d}/{name}.conf"),
            "-i".into(),
            format!("{d}/{name}.pid"),
            "-z".into(),
            format!("{d}/zserv.api"),
            "--vty_socket".into(),
            d.clone(),
            "-A".into(),
            "127.0.0.1".into(),
            "-P".into(),
            "0".into(),
            "--log".into(),
            format!("file:{d}/{name}.log"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let out = File::create(self.dir.join(format!("{name}.out"))).unwrap();
        let child = Command::new("ip")
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        self.daemons.push(child);
    }

    fn vtysh(&self, cmds: &[&str]) -> String {
        let mut args = vec![
            "netns",
            "exec",
            &self.ns,
            "vtysh",
            "--vty_socket",
            self.dir.to_str().unwrap(),
        ];
        for c in cmds {
            args.push("-c");
            args.push(c);
        }
        let out = Command::new("ip").args(&args).output().unwrap();
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn dump_logs(&self) {
        if let Ok(rd) = std::fs::read_dir(&self.dir) {
            for e in rd.flatten() {
                let p = e.path();
                if matches!(p.extension().and_then(|s| s.to_str()), Some("log" | "out")) {
                    eprintln!("===== {} =====", p.display());
                    eprintln!("{}", std::fs::read_to_string(&p).unwrap_or_default());
                }
            }
        }
        eprintln!("{}", self.vtysh(&["show ip route", "show ipv6 route"]));
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.dump_logs();
        }
        for c in &mut self.daemons {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = run(&["ip", "netns", "del", &self.ns]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Applies events to `rib` until `done(rib, event)` holds or `secs` pass.
fn pump(
    rx: &Receiver<FpmEvent>,
    rib: &mut Rib,
    events: &mut Vec<String>,
    secs: u64,
    what: &str,
    mut done: impl FnMut(&Rib, &FpmEvent) -> bool,
) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if let Ok(ev) = rx.recv_timeout(Duration::from_millis(200)) {
            events.push(match &ev {
                FpmEvent::Updates(u) => format!("Updates({u:?})"),
                other => format!("{other:?}"),
            });
            rib.handle(&ev);
            if done(rib, &ev) {
                return;
            }
        }
    }
    panic!("timed out waiting for {what}; events: {events:#?}");
}

type Expected = BTreeMap<Prefix, Vec<(IpAddr, u32)>>;

/// Static routes in the mirror, next hops resolved and sorted.
fn statics(rib: &Rib) -> Option<Expected> {
    let mut out = BTreeMap::new();
    for (table, prefix, r) in rib.routes() {
        if table != 254 || r.protocol != PROTO_STATIC {
            continue;
        }
        let mut nhs: Vec<(IpAddr, u32)> = rib
            .resolve(&r.nexthops)?
            .iter()
            .map(|n| (n.gateway.expect("gateway"), n.ifindex))
            .collect();
        nhs.sort();
        out.insert(*prefix, nhs);
    }
    Some(out)
}

fn have_frr() -> bool {
    Path::new(ZEBRA).exists()
        && Path::new(STATICD).exists()
        && unsafe { libc::geteuid() } == 0
        && Command::new("id")
            .arg("frr")
            .output()
            .is_ok_and(|o| o.status.success())
}

#[test]
fn zebra_routes_reach_fpm_server() {
    if !have_frr() {
        println!("SKIPPED: needs root, the frr user and {ZEBRA} (apt-get install frr)");
        return;
    }
    let mut lab = match Lab::new() {
        Ok(l) => l,
        Err(e) => {
            println!("SKIPPED: cannot build the namespace: {e}");
            return;
        }
    };
    let v0 = lab.ifindex("v0");
    let (fpm, rx) = lab.bind_fpm();

    // Default next-hop-group mode first (routes carry RTA_NH_ID).
    lab.write("zebra.conf", "fpm address 127.0.0.1\n");
    lab.write(
        "staticd.conf",
        "ip route 10.10.0.0/16 192.0.2.1\n\
         ip route 10.20.0.0/16 192.0.2.1\n\
         ip route 10.20.0.0/16 192.0.2.2\n\
         ipv6 route 2001:db8:100::/48 2001:db8::1\n",
    );
    run(&["chown", "-R", "frr:frr", lab.dir.to_str().unwrap()]).unwrap();
    lab.start(ZEBRA, "zebra", &["-M", "dplane_fpm_nl"]);
    std::thread::sleep(Duration::from_millis(500));
    lab.start(STATICD, "staticd", &[]);

    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let pfx = |s: &str| s.parse::<Prefix>().unwrap();
    let mut expected: Expected = BTreeMap::new();
    expected.insert(pfx("10.10.0.0/16"), vec![(ip("192.0.2.1"), v0)]);
    expected.insert(
        pfx("10.20.0.0/16"),
        vec![(ip("192.0.2.1"), v0), (ip("192.0.2.2"), v0)],
    );
    expected.insert(pfx("2001:db8:100::/48"), vec![(ip("2001:db8::1"), v0)]);

    let mut rib = Rib::new();
    let mut events = Vec::new();
    pump(
        &rx,
        &mut rib,
        &mut events,
        40,
        "the static routes",
        |r, _| statics(r).as_ref() == Some(&expected),
    );
    let used_ids = rib
        .routes()
        .any(|(_, _, r)| matches!(r.nexthops, NextHops::Id(_)));
    println!("next-hop-group mode: routes by id: {used_ids}");

    // Remove one route: a delete arrives.
    let out = lab.vtysh(&["configure terminal", "no ip route 10.10.0.0/16 192.0.2.1"]);
    let gone = pfx("10.10.0.0/16");
    pump(&rx, &mut rib, &mut events, 20, "the delete", |_, ev| {
        matches!(ev, FpmEvent::Updates(us) if us.iter().any(|u|
            matches!(u, RouteUpdate::Del { prefix, .. } if *prefix == gone)))
    });
    expected.remove(&gone);
    assert_eq!(statics(&rib).as_ref(), Some(&expected), "vtysh: {out}");

    // Switch to plain next hops: zebra reconnects and replays everything
    // with gateways inline; the mirror sweeps what was not replayed.
    let out = lab.vtysh(&["configure terminal", "no fpm use-next-hop-groups"]);
    let mut reconnected = false;
    pump(&rx, &mut rib, &mut events, 40, "the replay", |r, ev| {
        if matches!(ev, FpmEvent::Connected { .. }) {
            reconnected = true;
        }
        reconnected && matches!(ev, FpmEvent::Settled) && statics(r).as_ref() == Some(&expected)
    });
    for (_, p, r) in rib.routes() {
        if expected.contains_key(p) {
            assert!(
                matches!(r.nexthops, NextHops::List(_)),
                "{p}: {r:?} (vtysh: {out})"
            );
        }
    }
    let s = fpm.stats().snapshot();
    println!("FPM counters: {s:?}");
    assert!(s.connections >= 2);
    assert_eq!(s.decode_errors, 0);
    assert_eq!(s.frame_errors, 0);
    assert!(s.routes_removed >= 1);
    drop(fpm);
}
