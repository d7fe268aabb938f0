//! Issue 13, items 4 and 5: the management socket.
//!
//! 4. A second `lanyard run` with a running switch's socket stops before
//!    touching anything: it exits non-zero saying the socket is in use,
//!    and the first switch still answers, keeps its socket and its ports
//!    (MTU, forwarding), and no TAP of the second one appears.
//! 5. `lanyard run` serves on `--socket` or `LANYARD_SOCKET` when given
//!    (precedence: option, environment, `management.socket`, default).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use testkit::frame::{mac, test_frame, BROADCAST};
use testkit::{l2, require_root, Netns, Switch, TestBed};

fn lanyard() -> String {
    l2::bin(env!("CARGO_BIN_EXE_lanyard"))
}

fn mtu_of(ns: &Netns, ifname: &str) -> u32 {
    let out = ns
        .exec(&["cat", &format!("/sys/class/net/{ifname}/mtu")])
        .expect("read mtu");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}

fn link_exists(ns: &Netns, ifname: &str) -> bool {
    ns.exec(&["ip", "link", "show", ifname])
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// `lanyard [pre...] run --config FILE` in `ns`, waited for up to `wait`
/// (killed after it): the output, or `None` if it was still running.
fn run_for(
    ns: &Netns,
    pre: &[&str],
    env: &[(&str, &Path)],
    cfg: &Path,
    wait: Duration,
) -> Option<Output> {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns.name(), &lanyard()])
        .args(pre)
        .args(["run", "--config"])
        .arg(cfg)
        .env_remove("LANYARD_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn lanyard");
    let t0 = Instant::now();
    while t0.elapsed() < wait {
        if child.try_wait().expect("wait").is_some() {
            return Some(child.wait_with_output().expect("output"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
    None
}

fn answers(sock: &Path) -> bool {
    Command::new(lanyard())
        .arg("--socket")
        .arg(sock)
        .args(["show", "version", "--json"])
        .env_remove("LANYARD_SOCKET")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

#[test]
fn issue13_second_run_leaves_the_running_switch_alone() {
    require_root!();
    let bed = TestBed::new("i13so", 3, 1500).expect("namespaces");
    let yaml = "ports:\n  - name: sw1\n  - name: sw2\n    mtu: 1500\n";
    let sw = Switch::start(&lanyard(), &bed.dut, yaml, &["sw1", "sw2"]).expect("start");
    let sock = sw.socket().to_path_buf();
    let mtu1 = mtu_of(&bed.dut, "sw1");
    assert_eq!(mtu_of(&bed.dut, "sw2"), 1500);

    // The same socket; ports the first switch owns (with other MTUs) and a
    // routed port that would get a TAP.
    let dir = sock.parent().unwrap().to_path_buf();
    let cfg = dir.join("second.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:\n  - name: sw1\n    mtu: 1400\n  - name: sw2\n    mtu: 1300\n\
             \x20 - name: sw3\n    mode: routed\n    addresses: [10.13.0.1/24]\n\
             management:\n  socket: {}\n",
            sock.display()
        ),
    )
    .unwrap();
    let out = run_for(&bed.dut, &[], &[], &cfg, Duration::from_secs(10))
        .expect("the second switch exits instead of running");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "second switch exit status: {err}");
    assert!(
        err.contains("in use by a running switch") && err.contains(&sock.display().to_string()),
        "clear message naming the socket: {err}"
    );
    assert!(
        !err.contains("port sw") && !err.contains("routed port"),
        "nothing attached before the check: {err}"
    );

    // The first switch: socket, answers, ports untouched, still forwarding.
    assert!(sock.exists(), "the running switch's socket is still there");
    assert!(answers(&sock), "the first switch still answers show");
    assert_eq!(sw.port_state("sw1").as_deref(), Some("up"));
    assert_eq!(mtu_of(&bed.dut, "sw1"), mtu1, "sw1 MTU untouched");
    assert_eq!(mtu_of(&bed.dut, "sw2"), 1500, "sw2 MTU untouched");
    assert!(
        !link_exists(&bed.dut, "ly-sw3"),
        "no TAP of the second switch"
    );
    let ports = bed.open_all().expect("sockets");
    let f = test_frame(&BROADCAST, &mac(0x1301), &[], 1, 1, 100);
    ports[0].send(&f).unwrap();
    let got = ports[1]
        .recv_test_frames(Duration::from_millis(300))
        .unwrap();
    assert_eq!(got.len(), 1, "the first switch still forwards");

    // Its lock file says who holds the socket.
    let lock = PathBuf::from(format!("{}.lock", sock.display()));
    let holder = std::fs::read_to_string(&lock).expect("lock file");
    assert!(err.contains(&format!("pid {}", holder.trim())), "{err}");
    drop(sw);
    assert!(!sock.exists() && !lock.exists(), "both removed on shutdown");
}

#[test]
fn issue13_run_serves_on_the_socket_it_is_given() {
    require_root!();
    let ns = Netns::new("i13sk").expect("namespace");
    let dir = std::env::temp_dir().join(format!("lanyard-i13sock-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (from_cfg, from_opt, from_env) = (
        dir.join("cfg.sock"),
        dir.join("opt.sock"),
        dir.join("env.sock"),
    );
    let cfg = dir.join("c.yaml");
    std::fs::write(
        &cfg,
        format!(
            "ports:\n  - name: nosuch13\nmanagement:\n  socket: {}\n",
            from_cfg.display()
        ),
    )
    .unwrap();

    // Runs the switch with `pre`/`env`, waits until `want` answers, and
    // checks no other candidate socket exists meanwhile.
    let check = |pre: &[&str], env: &[(&str, &Path)], want: &Path| {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns.name(), &lanyard()])
            .args(pre)
            .args(["run", "--config"])
            .arg(&cfg)
            .env_remove("LANYARD_SOCKET")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().expect("spawn");
        let t0 = Instant::now();
        while !answers(want) && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let up = answers(want);
        let others: Vec<&PathBuf> = [&from_cfg, &from_opt, &from_env]
            .into_iter()
            .filter(|p| p.as_path() != want && p.exists())
            .collect();
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = child.wait_with_output().expect("wait");
        assert!(
            up && others.is_empty(),
            "{pre:?} {env:?}: want {} answering ({up}), others {others:?}; log: {}",
            want.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!want.exists(), "removed on shutdown");
    };
    let opt = from_opt.to_str().unwrap();
    check(&[], &[], &from_cfg);
    check(&["--socket", opt], &[], &from_opt);
    check(&[], &[("LANYARD_SOCKET", &from_env)], &from_env);
    check(
        &["--socket", opt],
        &[("LANYARD_SOCKET", &from_env)],
        &from_opt,
    );
    let _ = std::fs::remove_dir_all(&dir);
}
