//! Bulk provisioning: a stream of subscriber records, one per line, from a
//! file or the management API.
//!
//! ```text
//! # comments and blank lines are ignored
//! add alice package=gold addr=192.0.2.10,2001:db8:10::/56 quota=50G
//! set bob package=bronze addr=198.51.100.0/30
//! del carol
//! ```
//!
//! * `add ID …` creates a subscriber (error if the id exists), `set ID …`
//!   creates or replaces one, `del ID` removes one.
//! * Fields are `key=value`, in any order: `package=` gold|silver|bronze
//!   (required), `addr=` one or more comma-separated addresses or prefixes
//!   (required, at most 16), `quota=` bytes with an optional K/M/G/T suffix
//!   (powers of 1000), `cap-up=` / `cap-down=` a cap on all the
//!   subscriber's traffic in bits/s (`2M`, `1.5G`), `quota-exceeded=`
//!   `drop` or a rate in bits/s (what a used-up quota leaves; default: the
//!   configured `quota-exceeded`). Files without the newer fields read as
//!   before.
//! * Lines are at most [`MAX_LINE`] bytes; longer lines are errors.
//!
//! The stream is read line by line (memory does not grow with its length)
//! and applied to the table's working copy, which is published once at the
//! end. [`Mode::Atomic`] (the default) applies nothing if any line is bad;
//! [`Mode::SkipErrors`] applies the good lines. Either way every error is
//! counted and the first [`MAX_REPORTED`] are reported with their line
//! number. Parsing is fuzzed (`fuzz_dpi_provision`).

use crate::subscriber::{
    DbError, Limits, Package, Prefix, Subscriber, SubscriberDb, MAX_CAP_BPS, MAX_PREFIXES,
};
use std::fmt::Write as _;
use std::io::{BufRead, Read};

/// Longest line accepted, bytes.
pub const MAX_LINE: usize = 4096;

/// Errors listed in a [`Report`] (all are counted).
pub const MAX_REPORTED: usize = 20;

/// One parsed line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Add(Subscriber),
    Set(Subscriber),
    Del(Box<str>),
}

/// How errors affect the rest of the stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Any bad line: nothing is applied.
    #[default]
    Atomic,
    /// Bad lines are skipped (and reported); the rest is applied.
    SkipErrors,
}

/// The outcome of one load.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    pub lines: u64,
    pub added: u64,
    pub replaced: u64,
    pub removed: u64,
    pub error_count: u64,
    /// `line N: why`, at most [`MAX_REPORTED`].
    pub errors: Vec<String>,
    /// False when an atomic load was rolled back.
    pub applied: bool,
    pub subscribers: u64,
}

impl Report {
    fn error(&mut self, line: u64, why: impl std::fmt::Display) {
        self.error_count += 1;
        if self.errors.len() < MAX_REPORTED {
            self.errors.push(format!("line {line}: {why}"));
        }
    }

    /// Switch-like summary lines.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} lines: {} added, {} replaced, {} removed, {} errors{}",
            self.lines,
            self.added,
            self.replaced,
            self.removed,
            self.error_count,
            if self.applied {
                ""
            } else {
                " (nothing applied)"
            }
        );
        for e in &self.errors {
            let _ = writeln!(s, "  {e}");
        }
        if self.error_count > self.errors.len() as u64 {
            let _ = writeln!(
                s,
                "  ... {} more",
                self.error_count - self.errors.len() as u64
            );
        }
        let _ = writeln!(s, "{} subscribers provisioned", self.subscribers);
        s
    }
}

/// Parses one line (without its newline). `Ok(None)` for blank/comment.
pub fn parse_line(line: &str) -> Result<Option<Record>, String> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return Ok(None);
    }
    let mut words = line.split_ascii_whitespace();
    let verb = words.next().unwrap_or_default();
    let id = words
        .next()
        .ok_or_else(|| format!("'{verb}' needs a subscriber id"))?;
    crate::subscriber::check_id(id).map_err(|e| e.to_string())?;
    match verb {
        "del" => {
            if let Some(extra) = words.next() {
                return Err(format!("unexpected '{extra}' after 'del {id}'"));
            }
            Ok(Some(Record::Del(id.into())))
        }
        "add" | "set" => {
            let mut package = None;
            let mut prefixes = None;
            let mut quota = None;
            let mut caps: [Option<u64>; 2] = [None, None];
            let mut quota_rate = None;
            let mut period = None;
            for w in words {
                let (k, v) = w
                    .split_once('=')
                    .ok_or_else(|| format!("'{w}' is not key=value"))?;
                match k {
                    "package" => {
                        if package.is_some() {
                            return Err("package given twice".into());
                        }
                        package = Some(Package::parse(v).ok_or_else(|| {
                            format!("unknown package '{v}' (gold, silver, bronze)")
                        })?);
                    }
                    "addr" => {
                        if prefixes.is_some() {
                            return Err("addr given twice (list them comma-separated)".into());
                        }
                        let mut ps: Vec<Prefix> = Vec::new();
                        for a in v.split(',') {
                            if ps.len() == MAX_PREFIXES {
                                return Err(
                                    DbError::TooManyPrefixes(v.split(',').count()).to_string()
                                );
                            }
                            let p = Prefix::parse(a)?;
                            if ps.contains(&p) {
                                return Err(format!("{p} listed twice"));
                            }
                            ps.push(p);
                        }
                        prefixes = Some(ps);
                    }
                    "quota" => {
                        if quota.is_some() {
                            return Err("quota given twice".into());
                        }
                        quota = Some(parse_bytes(v)?);
                    }
                    "cap-up" | "cap-down" => {
                        let d = usize::from(k == "cap-down");
                        if caps[d].is_some() {
                            return Err(format!("{k} given twice"));
                        }
                        caps[d] = Some(parse_rate(v).map_err(|e| format!("{k}: {e}"))?);
                    }
                    "quota-exceeded" => {
                        if quota_rate.is_some() {
                            return Err("quota-exceeded given twice".into());
                        }
                        quota_rate = Some(match v {
                            "drop" => 0,
                            r => parse_rate(r).map_err(|e| {
                                format!("quota-exceeded: {e} (or 'drop')")
                            })?,
                        });
                    }
                    "quota-period" => {
                        if period.is_some() {
                            return Err("quota-period given twice".into());
                        }
                        period = Some(parse_period(v)?);
                    }
                    _ => {
                        return Err(format!(
                            "unknown field '{k}' (package, addr, quota, quota-period, cap-up, cap-down, quota-exceeded)"
                        ))
                    }
                }
            }
            let s = Subscriber {
                id: id.into(),
                package: package.ok_or("missing package=")?,
                quota_bytes: quota,
                prefixes: prefixes.ok_or("missing addr=")?,
                limits: Limits {
                    cap_bps: [caps[0].unwrap_or(0), caps[1].unwrap_or(0)],
                    quota_rate_bps: quota_rate,
                    quota_period_s: period,
                },
            };
            Ok(Some(if verb == "add" {
                Record::Add(s)
            } else {
                Record::Set(s)
            }))
        }
        _ => Err(format!("unknown command '{verb}' (add, set, del)")),
    }
}

/// A quota period: seconds, or a number with `s`, `m` (minutes), `h` or
/// `d`; at least 1 s, at most 10 years.
pub fn parse_period(v: &str) -> Result<u64, String> {
    let (num, mult) = match v.char_indices().last() {
        Some((i, 's')) => (&v[..i], 1),
        Some((i, 'm')) => (&v[..i], 60),
        Some((i, 'h')) => (&v[..i], 3600),
        Some((i, 'd')) => (&v[..i], 86_400),
        _ => (v, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|n| (1..=3650 * 86_400).contains(n))
        .ok_or_else(|| {
            format!("quota-period '{v}' is not a period of 1 s to 3650 d (e.g. 30d, 12h)")
        })
}

/// A rate in bits/s: `64000`, `128k`, `2M`, `1.5G` (powers of 1000),
/// above 0 and at most [`MAX_CAP_BPS`].
pub fn parse_rate(v: &str) -> Result<u64, String> {
    let bad = || format!("'{v}' is not a rate in bits/s above 0 (e.g. 128k, 2M, 1.5G)");
    let (num, mult) = match v.char_indices().last() {
        Some((i, 'K' | 'k')) => (&v[..i], 1e3),
        Some((i, 'M' | 'm')) => (&v[..i], 1e6),
        Some((i, 'G' | 'g')) => (&v[..i], 1e9),
        Some((i, 'T' | 't')) => (&v[..i], 1e12),
        _ => (v, 1.0),
    };
    // Digits and at most one point only ("inf", "1e9", "-1" are refused).
    if num.is_empty()
        || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.')
        || num.bytes().filter(|&b| b == b'.').count() > 1
    {
        return Err(bad());
    }
    let x = num.parse::<f64>().map_err(|_| bad())? * mult;
    if x.is_nan() || x < 1.0 || x > MAX_CAP_BPS as f64 {
        return Err(bad());
    }
    Ok(x.round() as u64)
}

/// `123`, `10K`, `5M`, `50G`, `2T` (powers of 1000).
pub fn parse_bytes(v: &str) -> Result<u64, String> {
    let (num, mult) = match v.char_indices().last() {
        Some((i, 'K' | 'k')) => (&v[..i], 1_000),
        Some((i, 'M' | 'm')) => (&v[..i], 1_000_000),
        Some((i, 'G' | 'g')) => (&v[..i], 1_000_000_000),
        Some((i, 'T' | 't')) => (&v[..i], 1_000_000_000_000),
        _ => (v, 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("quota '{v}' is not a byte count (e.g. 500M, 50G)"))
}

/// Writes one subscriber as a `set` line (what [`parse_line`] reads back).
pub fn format_line(s: &Subscriber) -> String {
    let mut out = format!("set {} package={} addr=", s.id, s.package.name());
    for (i, p) in s.prefixes.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{p}");
    }
    if let Some(q) = s.quota_bytes {
        let _ = write!(out, " quota={q}");
    }
    for (k, c) in [
        ("cap-up", s.limits.cap_bps[0]),
        ("cap-down", s.limits.cap_bps[1]),
    ] {
        if c != 0 {
            let _ = write!(out, " {k}={c}");
        }
    }
    if let Some(p) = s.limits.quota_period_s {
        let _ = write!(out, " quota-period={p}");
    }
    match s.limits.quota_rate_bps {
        Some(0) => out.push_str(" quota-exceeded=drop"),
        Some(r) => {
            let _ = write!(out, " quota-exceeded={r}");
        }
        None => {}
    }
    out
}

/// Reads records from `input` and applies them to `db`, publishing once at
/// the end (or not at all: see [`Mode`]). I/O errors end the load as an
/// error line.
pub fn load(db: &mut SubscriberDb, input: impl BufRead, mode: Mode) -> Report {
    let checkpoint = (mode == Mode::Atomic).then(|| db.checkpoint());
    let mut r = Report::default();
    let mut input = input;
    let mut buf = Vec::with_capacity(256);
    loop {
        buf.clear();
        let n = match (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)
        {
            Ok(n) => n,
            Err(e) => {
                r.error(r.lines + 1, format!("read error: {e}"));
                break;
            }
        };
        if n == 0 {
            break;
        }
        r.lines += 1;
        let line_no = r.lines;
        if buf.last() != Some(&b'\n') && buf.len() > MAX_LINE {
            r.error(line_no, format!("longer than {MAX_LINE} bytes"));
            // Skip the rest of the over-long line.
            let mut skip = Vec::new();
            loop {
                skip.clear();
                match (&mut input)
                    .take(MAX_LINE as u64)
                    .read_until(b'\n', &mut skip)
                {
                    Ok(0) | Err(_) => break,
                    Ok(_) if skip.last() == Some(&b'\n') => break,
                    Ok(_) => {}
                }
            }
            continue;
        }
        let text = match std::str::from_utf8(&buf) {
            Ok(t) => t,
            Err(_) => {
                r.error(line_no, "not UTF-8");
                continue;
            }
        };
        let rec = match parse_line(text) {
            Ok(Some(rec)) => rec,
            Ok(None) => continue,
            Err(e) => {
                r.error(line_no, e);
                continue;
            }
        };
        if r.error_count > 0 && mode == Mode::Atomic {
            // Keep checking syntax to report errors, but stop changing a
            // table that will be rolled back.
            continue;
        }
        let res = match rec {
            Record::Add(s) => db.upsert(s, false).map(|_| r.added += 1),
            Record::Set(s) => {
                let existed = db.get(&s.id).is_some();
                db.upsert(s, true).map(|_| {
                    if existed {
                        r.replaced += 1
                    } else {
                        r.added += 1
                    }
                })
            }
            Record::Del(id) => db.remove(&id).map(|_| r.removed += 1),
        };
        if let Err(e) = res {
            r.error(line_no, e);
        }
    }
    if r.error_count > 0 && mode == Mode::Atomic {
        db.restore(checkpoint.expect("atomic mode has a checkpoint"));
        r.applied = false;
        r.added = 0;
        r.replaced = 0;
        r.removed = 0;
    } else {
        db.publish();
        r.applied = true;
    }
    r.subscribers = db.len() as u64;
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn v4(s: &str) -> u128 {
        u128::from(u32::from(s.parse::<std::net::Ipv4Addr>().unwrap()))
    }

    #[test]
    fn lines_parse_and_round_trip() {
        let r = parse_line("add alice package=gold addr=192.0.2.10,2001:db8:10::/56 quota=50G")
            .unwrap()
            .unwrap();
        let Record::Add(s) = r else { panic!() };
        assert_eq!(s.package, Package::Gold);
        assert_eq!(s.quota_bytes, Some(50_000_000_000));
        assert_eq!(s.prefixes.len(), 2);
        let back = parse_line(&format_line(&s)).unwrap().unwrap();
        assert_eq!(back, Record::Set(s));
        assert_eq!(parse_line("  # x").unwrap(), None);
        assert_eq!(
            parse_line("del bob").unwrap(),
            Some(Record::Del("bob".into()))
        );
    }

    #[test]
    fn caps_and_quota_action_parse_round_trip_and_reach_the_link() {
        let r = parse_line("set bob package=bronze addr=10.0.0.2 quota=1G cap-up=2M cap-down=1.5G quota-exceeded=128k")
            .unwrap()
            .unwrap();
        let Record::Set(s) = r else { panic!() };
        assert_eq!(s.limits.cap_bps, [2_000_000, 1_500_000_000]);
        assert_eq!(s.limits.quota_rate_bps, Some(128_000));
        assert_eq!(
            parse_line(&format_line(&s)).unwrap().unwrap(),
            Record::Set(s.clone())
        );
        let d = parse_line("add c package=gold addr=10.0.0.3 quota-exceeded=drop cap-down=999")
            .unwrap()
            .unwrap();
        let Record::Add(d) = d else { panic!() };
        assert_eq!(d.limits.cap_bps, [0, 999]);
        assert_eq!(d.limits.quota_rate_bps, Some(0));
        assert_eq!(
            parse_line(&format_line(&d)).unwrap().unwrap(),
            Record::Set(d.clone())
        );
        // Old records (no new fields) read as before: no caps, the
        // configured quota action.
        let Record::Add(o) = parse_line("add o package=gold addr=10.0.0.4 quota=5G")
            .unwrap()
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(o.limits, Limits::default());
        let Record::Set(p) =
            parse_line("set p package=gold addr=10.0.0.5 quota=1G quota-period=30d")
                .unwrap()
                .unwrap()
        else {
            panic!()
        };
        assert_eq!(p.limits.quota_period_s, Some(30 * 86_400));
        assert_eq!(
            parse_line(&format_line(&p)).unwrap().unwrap(),
            Record::Set(p.clone())
        );
        assert_eq!(parse_period("90m"), Ok(5400));
        assert_eq!(parse_period("12h"), Ok(43_200));
        assert!(parse_period("0").is_err() && parse_period("5y").is_err());
        assert!(parse_period("99999d")
            .unwrap_err()
            .contains("1 s to 3650 d"));
        // A period restarts the account; reset-usage does too.
        let mut db = SubscriberDb::new(4);
        let l = db.upsert(p, false).unwrap();
        assert_eq!(
            db.add_used_at(l.slot, l.gen, 600_000_000, 1000),
            Some(false)
        );
        assert_eq!(db.add_used_at(l.slot, l.gen, 500_000_000, 2000), Some(true));
        assert_eq!(db.period_start(l.slot, l.gen), Some(1000));
        // 31 days later: a new period (from day 30), this traffic only.
        let later = 1000 + 31 * 86_400;
        assert_eq!(db.add_used_at(l.slot, l.gen, 10, later), Some(false));
        assert_eq!(db.used(l.slot, l.gen), 10);
        assert_eq!(db.period_start(l.slot, l.gen), Some(1000 + 30 * 86_400));
        let mut db = SubscriberDb::new(4);
        let l = db.upsert(s, false).unwrap();
        assert_eq!(l.cap_kbps, [2000, 1_500_000]);
        assert_eq!(l.cap_bytes(0), 250_000);
        db.publish();
        let v = db.published().load_full();
        assert_eq!(
            v.lookup(v4("10.0.0.2"), false).unwrap().cap_kbps,
            [2000, 1_500_000]
        );
        let e = |l: &str| parse_line(l).unwrap_err();
        assert!(e("add x package=gold addr=10.0.0.1 cap-up=fast").contains("cap-up: 'fast'"));
        assert!(e("add x package=gold addr=10.0.0.1 cap-up=0").contains("above 0"));
        assert!(e("add x package=gold addr=10.0.0.1 cap-up=1e9").contains("not a rate"));
        assert!(e("add x package=gold addr=10.0.0.1 cap-up=1M cap-up=2M").contains("twice"));
        assert!(e("add x package=gold addr=10.0.0.1 quota-exceeded=slow").contains("or 'drop'"));
        assert!(e("add x package=gold addr=10.0.0.1 cap-down=9T").contains("not a rate"));
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let e = |l: &str| parse_line(l).unwrap_err();
        assert!(e("add x addr=10.0.0.1").contains("missing package"));
        assert!(e("add x package=gold").contains("missing addr"));
        assert!(e("add x package=platinum addr=10.0.0.1").contains("unknown package 'platinum'"));
        assert!(e("add x package=gold addr=10.0.0.1/8").contains("host bits"));
        assert!(e("add x package=gold addr=10.0.0.1 colour=red").contains("unknown field 'colour'"));
        assert!(e("add x package=gold addr=10.0.0.1 quota=lots").contains("quota 'lots'"));
        assert!(e("frob x").contains("unknown command"));
        assert!(e("add").contains("needs a subscriber id"));
        assert!(e("del x y").contains("unexpected 'y'"));
        assert!(e("add x package=gold addr=10.0.0.1,10.0.0.1").contains("listed twice"));
    }

    #[test]
    fn atomic_load_applies_nothing_on_error_and_reports_line_numbers() {
        let mut db = SubscriberDb::new(100);
        let text = "add a package=gold addr=10.0.0.1\n\nadd b package=gold addr=10.0.0.1\nadd c package=nope addr=10.0.0.3\n";
        let r = load(&mut db, Cursor::new(text), Mode::Atomic);
        assert!(!r.applied);
        assert_eq!(r.error_count, 2);
        assert_eq!(
            r.errors[0],
            "line 3: 10.0.0.1/32 already belongs to subscriber 'a'"
        );
        assert!(r.errors[1].starts_with("line 4: unknown package"));
        assert_eq!(db.len(), 0);
        assert!(db
            .published()
            .load()
            .lookup(v4("10.0.0.1"), false)
            .is_none());
        assert!(r.render().contains("(nothing applied)"));
    }

    #[test]
    fn skip_errors_applies_the_good_lines() {
        let mut db = SubscriberDb::new(100);
        let text = "add a package=gold addr=10.0.0.1\nadd b package=silver addr=10.0.0.1\nset c package=bronze addr=10.0.0.3\nset a package=silver addr=10.0.0.1\ndel zz\n";
        let r = load(&mut db, Cursor::new(text), Mode::SkipErrors);
        assert!(r.applied);
        assert_eq!(
            (r.added, r.replaced, r.removed, r.error_count),
            (2, 1, 0, 2)
        );
        let v = db.published().load_full();
        assert_eq!(
            v.lookup(v4("10.0.0.1"), false).unwrap().package,
            Package::Silver
        );
        assert_eq!(db.per_package().0, [0, 1, 1]);
    }

    #[test]
    fn overlong_and_binary_lines_are_errors_not_panics() {
        let mut db = SubscriberDb::new(100);
        let mut text = format!("add a package=gold addr={}\n", "1".repeat(MAX_LINE * 3));
        text.push_str("add b package=gold addr=10.0.0.2\n");
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n");
        let r = load(&mut db, Cursor::new(bytes), Mode::SkipErrors);
        assert_eq!(r.lines, 3);
        assert_eq!(r.error_count, 2);
        assert!(r.errors[0].starts_with("line 1: longer than"));
        assert_eq!(r.errors[1], "line 3: not UTF-8");
        assert_eq!(r.added, 1);
    }

    #[test]
    fn many_subscribers_stream_in() {
        let mut db = SubscriberDb::new(20_000);
        let mut text = String::new();
        for i in 0..20_000u32 {
            let _ = writeln!(
                text,
                "add s{i} package={} addr=10.{}.{}.{}",
                ["gold", "silver", "bronze"][i as usize % 3],
                i >> 16,
                (i >> 8) & 255,
                i & 255
            );
        }
        let r = load(&mut db, Cursor::new(text), Mode::Atomic);
        assert!(r.applied, "{:?}", r.errors);
        assert_eq!(r.subscribers, 20_000);
        let v = db.published().load_full();
        for i in (0..20_000u32).step_by(997) {
            let (_, link) = db.get(&format!("s{i}")).unwrap();
            assert_eq!(v.lookup(0x0a00_0000 | u128::from(i), false), Some(link));
        }
    }
}
