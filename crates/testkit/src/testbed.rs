//! Test beds over namespaces and raw ports: the usual DUT/tester pair of
//! namespaces joined by veth pairs, and a probe of what the kernel itself
//! delivers.

use crate::netns::{ip, veth, Netns};
use crate::rawport::RawPort;
use std::io;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The usual bed for switch tests: a DUT namespace with ports `sw1..swN`,
/// a tester namespace with `t1..tN`, and veth pairs `t<i>` ↔ `sw<i>`.
pub struct TestBed {
    /// Where the tester's ends `t1..tN` live.
    pub tester: Netns,
    /// Where the switch runs and its ports `sw1..swN` live.
    pub dut: Netns,
    /// Number of port pairs.
    pub ports: usize,
}

impl TestBed {
    /// Cables `t1..tN` ↔ `sw1..swN` as veths with `queues` receive and
    /// transmit queues each (a bed made with 0 ports), IPv6 off, up; sets
    /// `ports` to `n`.
    pub fn cable_multi_queue(&mut self, n: usize, queues: u32) -> std::io::Result<()> {
        let q = queues.to_string();
        let q = ["numrxqueues", q.as_str(), "numtxqueues", q.as_str()];
        for i in 1..=n {
            let (t, s) = (format!("t{i}"), format!("sw{i}"));
            let mut args = vec!["-n", self.tester.name(), "link", "add", "name", &t];
            args.extend_from_slice(&q);
            args.extend_from_slice(&["type", "veth", "peer", "name", &s]);
            args.extend_from_slice(&q);
            args.extend_from_slice(&["netns", self.dut.name()]);
            crate::netns::ip(&args)?;
            for (ns, dev) in [(&self.tester, &t), (&self.dut, &s)] {
                ns.sysctl(&format!("net.ipv6.conf.{dev}.disable_ipv6"), "1")?;
                ns.link_up(dev, None)?;
            }
        }
        self.ports = n;
        Ok(())
    }

    /// The MAC address of the tester's interface `ifname`.
    pub fn tester_mac(&self, ifname: &str) -> crate::frame::Mac {
        self.tester.mac(ifname)
    }

    /// Creates both namespaces (names start with `prefix`, keep it ≤ 6
    /// characters) and `ports` veth pairs with MTU `mtu` on both ends.
    pub fn new(prefix: &str, ports: usize, mtu: u32) -> io::Result<TestBed> {
        let tester = Netns::new(&format!("{prefix}-t"))?;
        let dut = Netns::new(&format!("{prefix}-d"))?;
        for i in 1..=ports {
            veth(&tester, &format!("t{i}"), &dut, &format!("sw{i}"), mtu)?;
        }
        Ok(TestBed { tester, dut, ports })
    }

    /// Opens a raw tester socket on `t<i>` (1-based).
    pub fn open(&self, i: usize) -> io::Result<RawPort> {
        RawPort::open(self.tester.name(), &format!("t{i}"))
    }

    /// Opens raw tester sockets on `t1..tN`, index 0 = `t1`.
    pub fn open_all(&self) -> io::Result<Vec<RawPort>> {
        (1..=self.ports).map(|i| self.open(i)).collect()
    }

    /// The names `sw1..swN`.
    pub fn dut_ports(&self) -> Vec<String> {
        (1..=self.ports).map(|i| format!("sw{i}")).collect()
    }
}

/// Whether the kernel delivers `frame`, sent on one end of a scratch veth
/// pair in namespace `ns`, to a packet socket on the other end.
///
/// Some malformed frames never reach an `AF_PACKET` switch at all: Linux
/// drops a frame whose 802.1Q/802.1ad tag is cut short (`skb_vlan_untag`
/// needs 6 bytes after the Ethernet header) before any packet tap runs.
/// Tests use this probe to tell such kernel drops from switch behaviour.
pub fn kernel_delivers(ns: &Netns, frame: &[u8]) -> io::Result<bool> {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let (a, b) = (format!("kpa{n}"), format!("kpb{n}"));
    veth(ns, &a, ns, &b, 9500)?;
    let res = (|| {
        let pa = RawPort::open(ns.name(), &a)?;
        let pb = RawPort::open(ns.name(), &b)?;
        pa.send(frame)?;
        let deadline = Instant::now() + Duration::from_millis(300);
        while Instant::now() < deadline {
            if let Some(f) = pb.recv_timeout(Duration::from_millis(50))? {
                if f[..] == frame[..] {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    })();
    let _ = ip(&["-n", ns.name(), "link", "del", "dev", &a]);
    res
}
