//! Subscribers at scale (`type: subscribers`): the inline engine report's
//! "1,000,000 subscribers provisioned through an API".
//!
//! On an `inline: engine` DUT (started with `max-subscribers` room for
//! them) the lab writes N provisioning records — `sub-K`, IPv4
//! `100.64.0.0 + K` (`crate::flowset::subscriber4`), packages gold,
//! silver and bronze in turn — and loads them with one streamed bulk
//! call, `lanyard subscribers load FILE` (the API's
//! `{"cmd":"subscribers-load","stream":true}`; not one call per
//! subscriber). It reports the load's time and rate (the lab's wall clock
//! and the switch's own), the per-package counts read back from `show
//! service-control --json` (each must have grown by exactly its share of
//! N) and the daemon's resident memory before and after.
//!
//! Then S sampled subscribers spread evenly over the table
//! (`sub-⌊i·(N−1)/(S−1)⌋`) each send F UDP frames to a server
//! (`20.0.R.1`, R counting the runs; the lab's signature
//! port: service `lab`) and receive F from it: one stream per direction
//! cycling over the S address pairs, exactly F × S frames, so each
//! subscriber gets exactly F each way. Afterwards `show subscriber sub-K
//! --json` of every sampled subscriber must count exactly F packets and
//! F × (size − 4) bytes each way (Ethernet frames without FCS, as the
//! engine counts): the right subscriber found among N for every frame,
//! none missed, none counted twice.

use crate::engine::{Limit, Stream, TrialSpec};
use crate::plan::FrameSize;
use crate::procs::Ctx;
use crate::report::{ResultRow, TrialRecord};
use crate::sig::L3;
use crate::subspec::{Provision, PACKAGES};
use crate::LabError;
use serde_json::{json, Value};
use std::io::Write as _;
use std::sync::Arc;
use std::time::Instant;

/// Runs of the procedure in this process: each run's server is another
/// address ([`server`]).
static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// The server every sampled subscriber of run `run` talks to,
/// `20.0.R.1`: new flows each run, since a flow keeps the subscriber it
/// started with (a DUT that held this test's subscribers before still
/// holds their flows, attributed to the removed entries).
pub fn server(run: u32) -> [u8; 4] {
    [20, 0, (run % 250) as u8, 1]
}

/// Subscriber `k`'s ID.
pub fn name(k: u32) -> String {
    format!("sub-{k}")
}

/// Writes the provisioning records of `n` subscribers (`op`: `add` or
/// `del`) to `path`, streamed (memory does not grow with `n`).
pub fn write_records(path: &std::path::Path, n: u32, op: &str) -> Result<(), LabError> {
    let err = |e: std::io::Error| LabError::Other(format!("{}: {e}", path.display()));
    let f = std::fs::File::create(path).map_err(err)?;
    let mut w = std::io::BufWriter::with_capacity(1 << 20, f);
    for k in 0..n {
        if op == "del" {
            writeln!(w, "del {}", name(k)).map_err(err)?;
            continue;
        }
        let a = crate::flowset::subscriber4(k);
        writeln!(
            w,
            "add {} package={} addr={}.{}.{}.{}",
            name(k),
            PACKAGES[k as usize % 3],
            a[0],
            a[1],
            a[2],
            a[3]
        )
        .map_err(err)?;
    }
    w.flush().map_err(err)
}

/// `added` and the switch's `ms` from `lanyard subscribers load`'s first
/// line (`N lines: A added, R replaced, D removed, E errors (M ms)`).
pub fn parse_load(out: &str) -> Option<(u64, u64)> {
    let l = out.lines().next()?;
    let added = l
        .split(": ")
        .nth(1)?
        .split(' ')
        .next()?
        .parse::<u64>()
        .ok()?;
    let ms = l
        .rsplit('(')
        .next()?
        .trim_end_matches(')')
        .trim_end_matches(" ms")
        .parse::<u64>()
        .ok()?;
    Some((added, ms))
}

/// The provisioning verdict: `added` must be N, the total must grow by N
/// and each package by exactly its share (`before` / `after`: total,
/// gold, silver, bronze). Returns the growth per package too.
pub fn provisioned(
    p: &Provision,
    added: u64,
    before: [u64; 4],
    after: [u64; 4],
) -> (bool, [u64; 3]) {
    let grown = [1, 2, 3].map(|i| after[i].saturating_sub(before[i]));
    let ok = added == u64::from(p.subscribers)
        && after[0] == before[0] + u64::from(p.subscribers)
        && grown == p.per_package();
    (ok, grown)
}

/// What a sampled subscriber must count after `frames` frames of `size`
/// bytes (with FCS) each way: packets up, down, bytes up, down.
pub fn expected_counts(frames: u64, size: u16) -> [u64; 4] {
    let bytes = frames * u64::from(size.saturating_sub(4));
    [frames, frames, bytes, bytes]
}

/// `subscribers.total` and the three packages' counts of `show
/// service-control --json`.
fn counts(v: &Value) -> Option<[u64; 4]> {
    let s = &v["subscribers"];
    Some([
        s["total"].as_u64()?,
        s["gold"].as_u64()?,
        s["silver"].as_u64()?,
        s["bronze"].as_u64()?,
    ])
}

/// Packets and bytes up and down over every service of `show subscriber
/// ID --json`.
pub fn subscriber_counts(v: &Value) -> [u64; 4] {
    let mut o = [0u64; 4];
    for s in v["services"].as_array().into_iter().flatten() {
        for (x, k) in o
            .iter_mut()
            .zip(["packets-up", "packets-down", "bytes-up", "bytes-down"])
        {
            *x += s[k].as_u64().unwrap_or(0);
        }
    }
    o
}

/// One line of detail under the terminal table.
pub fn line(v: &Value) -> String {
    let g = |k: &str| v[k].as_f64().unwrap_or(0.0);
    format!(
        "{} subscribers loaded in {:.2} s ({:.0}/s; the switch: {} ms), gold/silver/bronze {}/{}/{}, \
         RSS {:.0} -> {:.0} MiB ({:.0} bytes per subscriber); {} of {} sampled subscribers counted \
         exactly {} frames each way",
        g("subscribers"),
        g("load_s"),
        g("per_s"),
        g("switch_ms"),
        v["packages"][0],
        v["packages"][1],
        v["packages"][2],
        g("rss_before_kib") / 1024.0,
        g("rss_after_kib") / 1024.0,
        g("bytes_per_subscriber"),
        g("matched"),
        g("sample"),
        g("frames")
    )
}

impl Ctx<'_> {
    /// The subscribers procedure at frame size `fs` (module comment).
    pub(crate) fn subscribers(
        &mut self,
        t: &crate::plan::Test,
        fs: &FrameSize,
        row: &mut ResultRow,
    ) -> Result<(), LabError> {
        let p = t
            .provision
            .ok_or_else(|| LabError::Other("subscribers without parameters".into()))?;
        let dut = self.dut;
        let show = |w: &[&str]| dut.lanyard_show(w);
        // Subscribers of an earlier run of this test on the same DUT go
        // first, so that the counts below are this load's.
        if show(&["subscriber", &name(0)]).is_ok() {
            let f = dut.tmp_dir().join("subscribers-del.txt");
            write_records(&f, p.subscribers, "del")?;
            dut.lanyard_cli(&["subscribers", "load", &f.to_string_lossy()])?;
            row.notes
                .push("the DUT held this test's subscribers already: removed first".into());
        }
        let before = counts(&show(&["service-control"])?)
            .ok_or_else(|| LabError::Dut("show service-control: no subscriber counts".into()))?;
        let rss0 = dut.lanyard_rss_kib();
        let file = dut.tmp_dir().join("subscribers-bulk.txt");
        self.progress.label(format!(
            "{} {}: writing {} provisioning records",
            dut.spec.name, row.test, p.subscribers
        ));
        write_records(&file, p.subscribers, "add")?;
        self.progress.label(format!(
            "{} {}: loading {} subscribers",
            dut.spec.name, row.test, p.subscribers
        ));
        let t0 = Instant::now();
        let out = dut.lanyard_cli(&["subscribers", "load", &file.to_string_lossy()]);
        let load_s = t0.elapsed().as_secs_f64();
        let _ = std::fs::remove_file(&file);
        let out = out?;
        let (added, switch_ms) = parse_load(&out).unwrap_or((0, 0));
        let rss1 = dut.lanyard_rss_kib();
        let after = counts(&show(&["service-control"])?)
            .ok_or_else(|| LabError::Dut("show service-control: no subscriber counts".into()))?;
        let want = p.per_package();
        let (mut ok, grown) = provisioned(&p, added, before, after);
        if !ok {
            row.notes.push(format!(
                "provisioning: {added} added of {}; per package {}/{}/{} (want {}/{}/{}), total {} -> {}",
                p.subscribers,
                grown[0],
                grown[1],
                grown[2],
                want[0],
                want[1],
                want[2],
                before[0],
                after[0]
            ));
        }
        // Traffic from and to the sampled subscribers.
        let size = fs.sizes[0];
        let srv = server(RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        let sampled: Vec<u32> = (0..p.sample).map(|i| p.sampled(i)).collect();
        let pairs = |up: bool| -> Arc<[L3]> {
            sampled
                .iter()
                .map(|&k| {
                    let s = crate::flowset::subscriber4(k);
                    if up {
                        L3::V4 { src: s, dst: srv }
                    } else {
                        L3::V4 { src: srv, dst: s }
                    }
                })
                .collect()
        };
        let streams: Vec<Stream> = [(0usize, 1usize, true), (1, 0, false)]
            .into_iter()
            .map(|(tx, rx, up)| Stream {
                tx,
                expect: Some(rx),
                also: None,
                src: crate::dut::host_mac(tx),
                src_count: 1,
                dst: crate::dut::host_mac(rx),
                dst_count: 1,
                sizes: vec![size],
                l3: Some(pairs(up)),
                arrival: None,
                receivers: None,
                vlan: None,
            })
            .collect();
        let spec = TrialSpec {
            rates: (0..self.tester.ports())
                .map(|q| (q < 2).then_some(p.rate))
                .collect(),
            streams,
            limit: Limit::Frames(p.frames * u64::from(p.sample)),
            drain: t.drain,
            burst: t.burst,
        };
        self.progress.label(format!(
            "{} {}: {} frames each way from {} sampled subscribers",
            dut.spec.name, row.test, p.frames, p.sample
        ));
        crate::netns::sleep_checked(t.learn_wait)?;
        // Every trial starts at the first pair, so pair i gets frames
        // i, i + S, … : exactly F each.
        let offset = self.tester.l3_offset.take();
        let r = self.tester.run(&spec);
        self.tester.l3_offset = offset;
        let r = r?;
        self.progress
            .advance(t.trial_duration + t.drain + t.learn_wait);
        // Each sampled subscriber's counters against what was sent.
        let want_sub = expected_counts(p.frames, size);
        let bytes = want_sub[2];
        let t1 = Instant::now();
        let mut matched = 0u64;
        let mut wrong = Vec::new();
        for &k in &sampled {
            match show(&["subscriber", &name(k)]) {
                Ok(v) => {
                    let got = subscriber_counts(&v);
                    if got == want_sub {
                        matched += 1;
                    } else if wrong.len() < 10 {
                        wrong.push(json!({"subscriber": name(k), "counted": got}));
                    }
                }
                Err(e) => {
                    if wrong.len() < 10 {
                        wrong.push(json!({"subscriber": name(k), "error": e.to_string()}));
                    }
                }
            }
        }
        let read_s = t1.elapsed().as_secs_f64();
        let sent_ok = r
            .streams
            .iter()
            .all(|s| s.sent == p.frames * u64::from(p.sample));
        if !sent_ok {
            row.notes.push(format!(
                "the tester sent {:?} frames per direction, not {}",
                r.streams.iter().map(|s| s.sent).collect::<Vec<_>>(),
                p.frames * u64::from(p.sample)
            ));
        }
        if matched < u64::from(p.sample) {
            row.notes.push(format!(
                "{} of {} sampled subscribers did not count {} packets / {} bytes each way \
                 (packets up, down, bytes up, down); first: {}",
                u64::from(p.sample) - matched,
                p.sample,
                p.frames,
                bytes,
                serde_json::to_string(&wrong).unwrap_or_default()
            ));
        }
        if r.lost != 0 {
            row.notes.push(format!(
                "{} of {} frames did not come back out of the DUT",
                r.lost, r.sent
            ));
        }
        ok &= sent_ok && matched == u64::from(p.sample) && r.tester_rx_drops == 0;
        let rss_delta = match (rss0, rss1) {
            (Some(a), Some(b)) => b.saturating_sub(a) * 1024,
            _ => 0,
        };
        crate::procs::merge(
            &mut row.detail,
            json!({ "subscribers": {
                "subscribers": p.subscribers,
                "added": added,
                "load_s": load_s,
                "per_s": f64::from(p.subscribers) / load_s.max(1e-9),
                "switch_ms": switch_ms,
                "packages": grown,
                "expected_packages": want,
                "total_before": before[0],
                "total_after": after[0],
                "rss_before_kib": rss0,
                "rss_after_kib": rss1,
                "bytes_per_subscriber": rss_delta as f64 / f64::from(p.subscribers),
                "sample": p.sample,
                "sampled_first_last": [name(sampled[0]), name(sampled[sampled.len() - 1])],
                "frames": p.frames,
                "frame_bytes": size,
                "matched": matched,
                "mismatched": wrong,
                "read_s": read_s,
            }}),
        );
        row.trials
            .push(TrialRecord::new("subscribers", Some(p.rate), &r, ok));
        row.throughput_fps = Some(r.offered_fps);
        row.loss_ratio = Some(r.loss_ratio);
        row.value = Some(f64::from(p.subscribers) / load_s.max(1e-9));
        row.unit = Some("subscribers/s".into());
        row.pass = Some(ok);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Plan;

    fn plan(tests: &str) -> Result<Plan, LabError> {
        Plan::parse(&format!(
            "name: p\nduts:\n  - {{name: e, driver: lanyard, inline: engine}}\ntests:\n{tests}"
        ))
    }

    #[test]
    fn parses_the_load_the_sample_and_the_frames_per_subscriber() {
        let p =
            plan("  - {type: subscribers, subscribers: 1000000, sample: 200, trial-duration: 4}\n")
                .unwrap();
        let t = p.test(0).unwrap();
        assert_eq!((t.layer, t.ports), (Some(3), 2));
        assert_eq!(t.frame_sizes[0].sizes, vec![128]);
        let v = t.provision.unwrap();
        // 10,000 frames/s × 4 s over 200 subscribers.
        assert_eq!((v.subscribers, v.sample, v.frames), (1_000_000, 200, 200));
        assert_eq!((v.sampled(0), v.sampled(199)), (0, 999_999));
        assert_eq!(v.per_package(), [333_334, 333_333, 333_333]);
        // The DUT is started with room for them.
        let s = crate::dut::Setup::for_test(&p.duts[0], &t);
        assert_eq!(s.provision, 1_000_000);
        // Defaults: 100 sampled (fewer subscribers: all of them).
        let p = plan("  - {type: subscribers, subscribers: 20}\n").unwrap();
        let v = p.test(0).unwrap().provision.unwrap();
        assert_eq!((v.sample, v.frames, v.rate), (20, 1000, 10_000.0));
        let sampled: Vec<u32> = (0..20).map(|i| v.sampled(i)).collect();
        assert_eq!(sampled, (0..20).collect::<Vec<_>>());
    }

    #[test]
    fn bad_plans_name_the_field() {
        for (tests, want) in [
            ("{type: subscribers}", "tests[0].subscribers: required"),
            ("{type: subscribers, subscribers: 2000000}", "tests[0].subscribers: required: 1..1000000"),
            ("{type: subscribers, subscribers: 10, sample: 11}", "tests[0].sample: must be 1..10"),
            ("{type: subscribers, subscribers: 100000, sample: 20000}", "tests[0].sample: must be 1..10000"),
            ("{type: subscribers, subscribers: 10, rate: 200000}", "tests[0].rate"),
            ("{type: subscribers, subscribers: 1000, sample: 1000, rate: 100, trial-duration: 1}", "tests[0].trial-duration"),
            ("{type: subscribers, subscribers: 10, frame-sizes: [64, 128]}", "tests[0].frame-sizes: one fixed"),
            ("{type: subscribers, subscribers: 10, routes: 10}", "tests[0].routes: not a subscribers option"),
            ("{type: subscribers, subscribers: 10, trials: 3}", "tests[0].trials: not a subscribers option"),
            ("{type: throughput, sample: 10}", "tests[0].sample: only subscribers tests"),
        ] {
            let e = plan(&format!("  - {tests}\n"))
                .map(|p| p.test(0).map(|_| ()))
                .and_then(|r| r)
                .expect_err(tests)
                .to_string();
            assert!(e.contains(want), "{tests}: {e}");
        }
        let text = "name: p\nduts:\n  - {name: e, driver: lanyard, inline: engine}\n  - {name: w, driver: wire}\ntests:\n  - {type: subscribers, subscribers: 10}\n";
        let e = Plan::parse(text)
            .map(|p| p.test(0).map(|_| ()))
            .and_then(|r| r)
            .expect_err("wire")
            .to_string();
        assert!(e.contains("DUT \"w\" (wire) has no inline engine"), "{e}");
        let ok = text.replace("subscribers: 10}", "subscribers: 10, duts: [e]}");
        assert!(Plan::parse(&ok).unwrap().test(0).is_ok());
    }

    #[test]
    fn records_stream_to_a_file_and_parse_back() {
        let dir = std::env::temp_dir().join(format!("subscale-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("r.txt");
        write_records(&f, 4, "add").unwrap();
        let text = std::fs::read_to_string(&f).unwrap();
        assert_eq!(
            text,
            "add sub-0 package=gold addr=100.64.0.0\nadd sub-1 package=silver addr=100.64.0.1\n\
             add sub-2 package=bronze addr=100.64.0.2\nadd sub-3 package=gold addr=100.64.0.3\n"
        );
        // Every record is one the switch's parser takes.
        for l in text.lines() {
            let r = dpi::provision::parse_line(l).unwrap_or_else(|e| panic!("{l}: {e}"));
            assert!(r.is_some(), "{l}");
        }
        write_records(&f, 2, "del").unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "del sub-0\ndel sub-1\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            parse_load("20000 lines: 20000 added, 0 replaced, 0 removed, 0 errors (41 ms)\n20002 subscribers provisioned\n"),
            Some((20000, 41))
        );
        assert_eq!(parse_load("garbage"), None);
    }

    #[test]
    fn per_subscriber_counts_add_up_over_services() {
        let v = json!({"services": [
            {"name": "lab", "packets-up": 5, "packets-down": 5, "bytes-up": 620, "bytes-down": 620},
            {"name": "web", "packets-up": 1, "packets-down": 0, "bytes-up": 60, "bytes-down": 0},
        ]});
        assert_eq!(subscriber_counts(&v), [6, 5, 680, 620]);
        assert_eq!(subscriber_counts(&json!({})), [0; 4]);
    }

    #[test]
    fn the_verdict_wants_every_count_exact() {
        let p = plan("  - {type: subscribers, subscribers: 20000, sample: 20}\n")
            .unwrap()
            .test(0)
            .unwrap()
            .provision
            .unwrap();
        // The lab's two subscribers (gold) were there before.
        let before = [2, 2, 0, 0];
        let after = [20_002, 6_669, 6_667, 6_666];
        assert_eq!(
            provisioned(&p, 20_000, before, after),
            (true, [6_667, 6_667, 6_666])
        );
        // One subscriber short, one in the wrong package, a partial load.
        assert!(!provisioned(&p, 20_000, before, [20_001, 6_668, 6_667, 6_666]).0);
        assert!(!provisioned(&p, 20_000, before, [20_002, 6_670, 6_666, 6_666]).0);
        assert!(!provisioned(&p, 19_999, before, after).0);
        // 128-byte frames: 124 bytes counted per frame.
        assert_eq!(expected_counts(100, 128), [100, 100, 12_400, 12_400]);
        let v = json!({"services": [{"name": "lab", "packets-up": 100, "packets-down": 99,
                                     "bytes-up": 12_400, "bytes-down": 12_276}]});
        assert_ne!(subscriber_counts(&v), expected_counts(100, 128));
    }
}
