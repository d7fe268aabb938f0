//! Flow export end to end: FlowRecords pushed on worker queues go through
//! a FlowExporter to a real collector (nfcapd from nfdump), and `nfdump`
//! reads back exactly the addresses, ports, protocol, packets, bytes,
//! interfaces and durations sent; NetFlow v9 and IPFIX, each with its own
//! nfcapd (port, directory). Tests needing nfdump skip when `nfcapd` or
//! `nfdump` is not on PATH. Without a collector: templates come first,
//! partial datagrams leave promptly, sequence numbers and template
//! refresh, read with the crate's own decoder.

use services::export::netflow::{Decoder, TEMPLATE_V4, TEMPLATE_V6};
use services::export::{ExportConfig, ExportVersion, FlowExporter};
use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tables::flow::{FlowEnd, FlowExportQueue, FlowKey, FlowRecord};

use testkit::nfdump::Collector;
use testkit::require_nfdump;

fn v4(a: [u8; 4]) -> u128 {
    u128::from(u32::from_be_bytes(a))
}

fn v6(s: &str) -> u128 {
    u128::from(s.parse::<Ipv6Addr>().unwrap())
}

/// The flows sent: v4 and v6, TCP and UDP, one over 2^32 bytes, and a
/// few hundred more so that several datagrams are needed.
fn sample_records() -> Vec<FlowRecord> {
    let rec = |key: FlowKey, packets: u64, bytes: u64, dur: u64, out: u16| FlowRecord {
        key,
        packets,
        bytes,
        first_ms: 20_000,
        last_ms: 20_000 + dur,
        tcp_flags: if key.proto == 6 { 0x1b } else { 0 },
        out_port: out,
        end: FlowEnd::Inactive,
    };
    let k4 = |s: [u8; 4], d: [u8; 4], sp: u16, dp: u16, proto: u8| FlowKey {
        src_ip: v4(s),
        dst_ip: v4(d),
        src_port: sp,
        dst_port: dp,
        proto,
        tos: 0,
        family: 4,
        in_port: 2,
        vlan: 100,
    };
    let k6 = |s: &str, d: &str, sp: u16, dp: u16, proto: u8| FlowKey {
        src_ip: v6(s),
        dst_ip: v6(d),
        src_port: sp,
        dst_port: dp,
        proto,
        tos: 0,
        family: 6,
        in_port: 5,
        vlan: 0,
    };
    let mut v = vec![
        rec(
            k4([10, 1, 0, 1], [192, 0, 2, 10], 40_000, 443, 6),
            10,
            15_000,
            4_500,
            3,
        ),
        rec(
            k4([10, 1, 0, 2], [192, 0, 2, 53], 5353, 53, 17),
            3,
            240,
            1_000,
            3,
        ),
        rec(
            k4([10, 1, 0, 3], [198, 51, 100, 7], 50_000, 9_000, 6),
            5_000_000,
            6_000_000_000,
            59_000,
            4,
        ),
        rec(
            k6("2001:db8::1", "2001:db8:ffff::2", 12_345, 22, 6),
            77,
            9_000,
            2_250,
            7,
        ),
        rec(
            k6("2001:db8::3", "2001:db8:ffff::53", 33_333, 53, 17),
            1,
            100,
            0,
            7,
        ),
        rec(
            k6("2001:db8:1::9", "2001:db8:ffff::80", 44_444, 80, 6),
            1 << 20,
            (1 << 32) + 12_345,
            30_000,
            u16::MAX,
        ),
    ];
    for i in 0..300u32 {
        let key = if i % 3 == 0 {
            k6(
                &format!("2001:db8:2::{:x}", i + 1),
                "2001:db8:ffff::1",
                10_000 + i as u16,
                8080,
                17,
            )
        } else {
            k4(
                [10, 2, (i >> 8) as u8, i as u8],
                [192, 0, 2, 1],
                20_000 + i as u16,
                8080,
                17,
            )
        };
        v.push(rec(
            key,
            1 + u64::from(i),
            100 * (1 + u64::from(i)),
            1_000,
            1,
        ));
    }
    v
}

fn addr_string(k: &FlowKey, src: bool) -> String {
    let a = if src { k.src_ip } else { k.dst_ip };
    if k.family == 4 {
        Ipv4Addr::from(a as u32).to_string()
    } else {
        Ipv6Addr::from(a).to_string()
    }
}

/// Records through an exporter to the collector at `collector`, spread
/// over two worker queues. Returns the exporter's stats after stop().
fn export(
    version: ExportVersion,
    collector: SocketAddr,
    records: &[FlowRecord],
) -> services::export::ExportStats {
    let queues: Vec<Arc<FlowExportQueue>> = (0..2)
        .map(|_| Arc::new(FlowExportQueue::new(1024)))
        .collect();
    // Records' clock: zero 100 s ago (records are in its past).
    let epoch = Instant::now()
        .checked_sub(Duration::from_secs(100))
        .unwrap_or_else(Instant::now);
    let cfg = ExportConfig {
        domain_id: 42,
        ..ExportConfig::new(collector, version)
    };
    let ex = FlowExporter::start(cfg, queues.clone(), epoch).unwrap();
    for (i, r) in records.iter().enumerate() {
        let q = &queues[i % 2];
        while q.push(*r).is_err() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let t = Instant::now();
    let stats = ex.stop();
    assert!(t.elapsed() < Duration::from_secs(2), "stop() is slow");
    stats
}

fn check_nfdump(version: ExportVersion, tag: &str) {
    let mut col = Collector::start(tag);
    let records = sample_records();
    let stats = export(version, col.addr(), &records);
    assert_eq!(
        stats.records,
        records.len() as u64,
        "{version:?}: {stats:?}"
    );
    assert_eq!(
        (stats.send_errors, stats.records_lost),
        (0, 0),
        "{version:?}"
    );
    // 306 records of 50–83 octets: several datagrams.
    assert!(stats.packets >= 10, "{version:?}: {stats:?}");
    // Let nfcapd read its socket before it is told to stop.
    std::thread::sleep(Duration::from_millis(300));
    let flows = col.flows();
    assert_eq!(
        flows.len(),
        records.len(),
        "{version:?}: nfdump saw {} flows of {}; nfcapd log:\n{}",
        flows.len(),
        records.len(),
        col.log()
    );
    let mut by_key: HashMap<(String, String, String, String), &HashMap<String, String>> =
        HashMap::new();
    for f in &flows {
        by_key.insert(
            (
                f["sa"].clone(),
                f["da"].clone(),
                f["sp"].clone(),
                f["dp"].clone(),
            ),
            f,
        );
    }
    for r in &records {
        let k = &r.key;
        let id = (
            addr_string(k, true),
            addr_string(k, false),
            k.src_port.to_string(),
            k.dst_port.to_string(),
        );
        let f = by_key
            .get(&id)
            .unwrap_or_else(|| panic!("{version:?}: flow {id:?} missing from nfdump output"));
        let proto = match k.proto {
            6 => "TCP".to_string(),
            17 => "UDP".to_string(),
            p => p.to_string(),
        };
        assert!(
            f["pr"] == proto || f["pr"] == k.proto.to_string(),
            "{id:?}: proto {}",
            f["pr"]
        );
        assert_eq!(
            f["ipkt"],
            r.packets.to_string(),
            "{version:?} {id:?}: packets"
        );
        assert_eq!(f["ibyt"], r.bytes.to_string(), "{version:?} {id:?}: bytes");
        assert_eq!(f["in"], (k.in_port + 1).to_string(), "{id:?}: input if");
        let out = if r.out_port == u16::MAX {
            0
        } else {
            r.out_port + 1
        };
        assert_eq!(f["out"], out.to_string(), "{id:?}: output if");
        let td: f64 = f["td"].parse().unwrap();
        let want = (r.last_ms - r.first_ms) as f64 / 1000.0;
        assert!(
            (td - want).abs() < 0.0015,
            "{version:?} {id:?}: duration {td} s, sent {want} s"
        );
        assert_eq!(f["svln"], k.vlan.to_string(), "{version:?} {id:?}: vlan");
        // Absolute time: the records' clock started 100 s before the
        // export, so nfcapd received each flow (first_ms / 1000) s after
        // the epoch, i.e. 100 − first_ms / 1000 s after its first packet.
        // Both columns are local time: the zone cancels out.
        let age = secs(&f["tr"]) - secs(&f["ts"]);
        let want = 100.0 - r.first_ms as f64 / 1000.0;
        assert!(
            (age - want).abs() < 3.0,
            "{version:?} {id:?}: first seen {} received {}: {age} s, want {want} s",
            f["ts"],
            f["tr"]
        );
    }
}

/// "YYYY-MM-DD hh:mm:ss[.mmm]" as seconds (civil calendar, no zone).
fn secs(t: &str) -> f64 {
    let (date, time) = t.trim().split_once(' ').expect("date time");
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (y, m, day) = (d[0] - i64::from(d[1] <= 2), d[1], d[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let hms: Vec<f64> = time.split(':').map(|x| x.parse().unwrap()).collect();
    days as f64 * 86_400.0 + hms[0] * 3600.0 + hms[1] * 60.0 + hms[2]
}

#[test]
fn v9_to_nfcapd() {
    require_nfdump!();
    check_nfdump(ExportVersion::V9, "v9");
}

#[test]
fn ipfix_to_nfcapd() {
    require_nfdump!();
    check_nfdump(ExportVersion::Ipfix, "ipfix");
}

/// A plain UDP socket as the collector; datagrams decoded by the crate's
/// own decoder.
struct Sink {
    sock: UdpSocket,
}

impl Sink {
    fn new() -> Sink {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        Sink { sock }
    }

    fn addr(&self) -> SocketAddr {
        self.sock.local_addr().unwrap()
    }

    fn recv(&self) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; 65536];
        let n = self.sock.recv(&mut buf).ok()?;
        buf.truncate(n);
        Some(buf)
    }
}

fn one_record(i: u32) -> FlowRecord {
    FlowRecord {
        key: FlowKey {
            src_ip: v4([10, 9, 0, 1]) + u128::from(i),
            dst_ip: v4([10, 9, 255, 1]),
            src_port: 1000,
            dst_port: 2000,
            proto: 17,
            tos: 0,
            family: 4,
            in_port: 0,
            vlan: 0,
        },
        packets: 1,
        bytes: 64,
        first_ms: 1,
        last_ms: 1,
        tcp_flags: 0,
        out_port: 1,
        end: FlowEnd::Forced,
    }
}

#[test]
fn templates_first_then_prompt_partial_datagram() {
    for version in [ExportVersion::V9, ExportVersion::Ipfix] {
        let sink = Sink::new();
        let q = Arc::new(FlowExportQueue::new(64));
        let ex = FlowExporter::start(
            ExportConfig::new(sink.addr(), version),
            vec![q.clone()],
            Instant::now(),
        )
        .unwrap();
        let mut d = Decoder::new();
        let first = d.decode(&sink.recv().expect("template datagram")).unwrap();
        assert_eq!(first.templates, vec![TEMPLATE_V4, TEMPLATE_V6]);
        assert!(first.records.is_empty());
        // One record, no stop(): it must leave on its own, promptly.
        std::thread::sleep(Duration::from_millis(50));
        let t = Instant::now();
        q.push(one_record(0)).unwrap();
        let m = d.decode(&sink.recv().expect("data datagram")).unwrap();
        let waited = t.elapsed();
        assert!(
            waited < Duration::from_millis(150),
            "{version:?}: {waited:?}"
        );
        assert_eq!(m.records.len(), 1);
        assert_eq!(m.records[0].in_if, 1);
        assert_eq!(m.records[0].out_if, 2);
        assert_eq!(m.header.domain_id, 0);
        let s = ex.stats();
        assert_eq!(
            (s.packets, s.records, s.templates, s.send_errors),
            (2, 1, 1, 0)
        );
        ex.stop();
    }
}

#[test]
fn sequence_numbers_and_template_refresh() {
    for version in [ExportVersion::V9, ExportVersion::Ipfix] {
        let sink = Sink::new();
        let q = Arc::new(FlowExportQueue::new(4096));
        // Everything queued before start: full datagrams back to back.
        for i in 0..1000 {
            q.push(one_record(i)).unwrap();
        }
        let cfg = ExportConfig {
            template_refresh_packets: 3,
            domain_id: 9,
            ..ExportConfig::new(sink.addr(), version)
        };
        let ex = FlowExporter::start(cfg, vec![q], Instant::now()).unwrap();
        let stats = ex.stop();
        let (records, datagrams) = read_all(&sink, version);
        assert_eq!(records, 1000, "{version:?}: records");
        assert_eq!(stats.records, 1000);
        assert_eq!(stats.packets as usize, datagrams);
        // Templates alone first, then every 3 datagrams at most.
        assert!(stats.templates as usize >= datagrams / 4, "{stats:?}");
    }
}

/// Reads all datagrams; checks sequences, sizes and template refresh.
/// Returns (records, datagrams).
fn read_all(sink: &Sink, version: ExportVersion) -> (usize, usize) {
    sink.sock
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut d = Decoder::new();
    let (mut records, mut datagrams) = (0usize, 0usize);
    let mut since_templates = 0;
    while let Some(m) = sink.recv() {
        assert!(m.len() <= 1400);
        let msg = d.decode(&m).unwrap();
        assert_eq!(msg.header.domain_id, 9);
        let want_seq = match version {
            ExportVersion::V9 => datagrams,
            ExportVersion::Ipfix => records,
        };
        assert_eq!(msg.header.sequence as usize, want_seq, "{version:?}");
        if msg.templates.is_empty() {
            since_templates += 1;
            assert!(since_templates <= 3, "{version:?}: templates not refreshed");
        } else {
            since_templates = 0;
        }
        records += msg.records.len();
        datagrams += 1;
    }
    assert!(datagrams > 10);
    (records, datagrams)
}

#[test]
fn bad_mtu_is_refused() {
    let cfg = ExportConfig {
        mtu: 100,
        ..ExportConfig::new("127.0.0.1:2055".parse().unwrap(), ExportVersion::V9)
    };
    assert!(FlowExporter::start(cfg, Vec::new(), Instant::now()).is_err());
}

/// `rate_limit`: 2,000 records at 10,000 records/s take at least 0.19 s
/// from the first data datagram to the last (spaced evenly, no burst),
/// and none is lost. Without the limit the same queue leaves at once.
#[test]
fn rate_limit_spaces_the_datagrams_and_loses_nothing() {
    let sink = Sink::new();
    let q = Arc::new(FlowExportQueue::new(4096));
    for i in 0..2000 {
        q.push(one_record(i)).unwrap();
    }
    let cfg = ExportConfig {
        rate_limit: Some(10_000),
        ..ExportConfig::new(sink.addr(), ExportVersion::Ipfix)
    };
    let ex = FlowExporter::start(cfg, vec![q.clone()], Instant::now()).unwrap();
    sink.sock
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut d = Decoder::new();
    let (mut records, mut first, mut last) = (0usize, None, Instant::now());
    while records < 2000 {
        let Some(m) = sink.recv() else { break };
        let n = d.decode(&m).unwrap().records.len();
        if n > 0 {
            first.get_or_insert_with(Instant::now);
            last = Instant::now();
        }
        records += n;
    }
    let spread = last - first.expect("no data datagram");
    let stats = ex.stop();
    assert_eq!(
        (records, stats.records, stats.records_lost),
        (2000, 2000, 0)
    );
    // The first datagram's records are not waited for: (2,000 − one
    // datagram) / 10,000 s at least.
    assert!(spread >= Duration::from_millis(190), "{spread:?}");
    assert!(stats.packets > 50, "{stats:?}");
}
