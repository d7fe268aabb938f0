//! The quota state file: subscribers' quota accounts (used bytes and the
//! start of the current period) kept across a restart (docs/inline.md,
//! "Quotas").
//!
//! Text, one account per line, so an operator can read (and mend) it:
//!
//! ```text
//! lanyard-quota-state 1
//! alice 123456789 1764190000
//! bob 0 1764100000
//! end 2
//! ```
//!
//! Fields: subscriber id, used bytes, period start (Unix seconds: the
//! monotonic clock starts again with the process, the wall clock does
//! not). Whether a quota is exceeded is not stored: it is `used ≥ quota`
//! with the quota provisioned now. The `end N` line (N = accounts) tells a
//! complete file from a truncated one; a file that fails any check is
//! refused whole ([`parse`] says where), never half applied.

use crate::subscriber::check_id;
pub use crate::subscriber::QuotaAccount as Account;
use std::fmt;

/// First line of every state file.
pub const MAGIC: &str = "lanyard-quota-state 1";

/// Longest file [`parse`] accepts (bytes): far above a million accounts of
/// 64-byte ids, far below a file that would hurt to read.
pub const MAX_BYTES: usize = 256 << 20;

/// Why a state file was refused: the line (1-based; 0 = the whole file)
/// and what is wrong there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateError {
    pub line: usize,
    pub why: String,
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.why)
        } else {
            write!(f, "line {}: {}", self.line, self.why)
        }
    }
}

/// Writes `accounts` in the format [`parse`] reads.
pub fn format(accounts: &[Account]) -> String {
    let mut out = String::with_capacity(32 + accounts.len() * 40);
    out.push_str(MAGIC);
    out.push('\n');
    for a in accounts {
        out.push_str(&a.id);
        out.push(' ');
        out.push_str(&a.used.to_string());
        out.push(' ');
        out.push_str(&a.start_s.to_string());
        out.push('\n');
    }
    out.push_str("end ");
    out.push_str(&accounts.len().to_string());
    out.push('\n');
    out
}

/// Reads a state file. Any defect refuses the whole file (a partial
/// restore would silently give some subscribers a fresh quota).
pub fn parse(data: &[u8]) -> Result<Vec<Account>, StateError> {
    let err = |line: usize, why: String| StateError { line, why };
    if data.len() > MAX_BYTES {
        return Err(err(
            0,
            format!("{} bytes: larger than {MAX_BYTES}", data.len()),
        ));
    }
    let text = std::str::from_utf8(data).map_err(|e| {
        let line = data[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1;
        err(line, "not UTF-8 text".into())
    })?;
    let last = text.split('\n').count();
    let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    match lines.next() {
        Some((_, l)) if l == MAGIC => {}
        Some((_, l)) => {
            return Err(err(
                1,
                format!(
                    "not a quota state file (expected {MAGIC:?}, found {:?})",
                    trunc(l)
                ),
            ))
        }
        None => return Err(err(0, "empty".into())),
    }
    let mut accounts = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (n, l) in lines.by_ref() {
        if l.is_empty() && n == last {
            // The file's final newline, and no end line before it.
            break;
        }
        let mut f = l.split(' ');
        let (Some(a), b, c, d) = (f.next(), f.next(), f.next(), f.next()) else {
            unreachable!("split yields at least one field")
        };
        if a == "end" {
            let (Some(count), None, None) = (b, c, d) else {
                return Err(err(n, format!("bad end line {:?}", trunc(l))));
            };
            if count.parse::<usize>().ok() != Some(accounts.len()) {
                return Err(err(
                    n,
                    format!(
                        "end line says {:?} accounts, the file has {}",
                        trunc(count),
                        accounts.len()
                    ),
                ));
            }
            // Only the final newline may follow.
            return match lines.next() {
                Some((_, "")) if lines.next().is_none() => Ok(accounts),
                None => Ok(accounts),
                Some((m, _)) => Err(err(m, "text after the end line".into())),
            };
        }
        let (Some(used), Some(start), None) = (b, c, d) else {
            return Err(err(
                n,
                format!(
                    "expected 'ID USED-BYTES PERIOD-START', found {:?}",
                    trunc(l)
                ),
            ));
        };
        check_id(a).map_err(|e| err(n, e.to_string()))?;
        let num = |s: &str, what: &str| -> Result<u64, StateError> {
            // Digits only: `+5` or ` 5` are not what `format` writes.
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err(n, format!("{what} {:?} is not a number", trunc(s))));
            }
            s.parse()
                .map_err(|_| err(n, format!("{what} {:?} is out of range", trunc(s))))
        };
        let used = num(used, "used bytes")?;
        let start_s = num(start, "period start")?;
        if start_s == 0 {
            return Err(err(n, "period start 0".into()));
        }
        if !seen.insert(a) {
            return Err(err(n, format!("subscriber '{a}' appears twice")));
        }
        accounts.push(Account {
            id: a.into(),
            used,
            start_s,
        });
    }
    Err(err(
        0,
        format!("truncated: no end line after {} accounts", accounts.len()),
    ))
}

/// At most 40 characters of `s` for a message.
fn trunc(s: &str) -> String {
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acc(id: &str, used: u64, start_s: u64) -> Account {
        Account {
            id: id.into(),
            used,
            start_s,
        }
    }

    #[test]
    fn accounts_round_trip() {
        let a = vec![
            acc("alice", 123_456_789, 1_764_190_000),
            acc("b.o-b@x:1", u64::MAX, u64::MAX),
            acc("c", 0, 1),
        ];
        let text = format(&a);
        assert!(text.starts_with("lanyard-quota-state 1\nalice 123456789 1764190000\n"));
        assert!(text.ends_with("\nend 3\n"));
        assert_eq!(parse(text.as_bytes()).unwrap(), a);
        assert_eq!(parse(format(&[]).as_bytes()).unwrap(), vec![]);
        // Without the final newline too (an editor may drop it).
        assert_eq!(parse(text.trim_end().as_bytes()).unwrap(), a);
    }

    #[test]
    fn every_truncation_is_refused() {
        let text = format(&[acc("alice", 5000, 1_764_190_000), acc("bob", 7, 9)]);
        let full = text.trim_end().len();
        for cut in 0..full {
            let e = parse(&text.as_bytes()[..cut]).unwrap_err();
            assert!(!e.to_string().is_empty(), "cut {cut}");
        }
        let e = parse(&text.as_bytes()[..text.find("end").unwrap()]).unwrap_err();
        assert_eq!(e.to_string(), "truncated: no end line after 2 accounts");
    }

    #[test]
    fn corrupt_files_are_refused_with_the_line() {
        let cases: &[(&str, &str)] = &[
            ("", "line 1: not a quota state file"),
            (
                "lanyard-quota-state 2\nend 0\n",
                "line 1: not a quota state file",
            ),
            ("\u{0}\u{1}", "line 1: not a quota state file"),
            (
                "lanyard-quota-state 1\nalice 12x 5\nend 1\n",
                "line 2: used bytes \"12x\" is not a number",
            ),
            (
                "lanyard-quota-state 1\nalice 1 99999999999999999999\nend 1\n",
                "line 2: period start \"99999999999999999999\" is out of range",
            ),
            (
                "lanyard-quota-state 1\nalice 1 0\nend 1\n",
                "line 2: period start 0",
            ),
            (
                "lanyard-quota-state 1\nalice 1\nend 1\n",
                "line 2: expected",
            ),
            (
                "lanyard-quota-state 1\nalice 1 2 3\nend 1\n",
                "line 2: expected",
            ),
            (
                "lanyard-quota-state 1\nal ice 1 2\nend 1\n",
                "line 2: expected",
            ),
            (
                "lanyard-quota-state 1\nal/ice 1 2\nend 1\n",
                "line 2: bad subscriber id",
            ),
            (
                "lanyard-quota-state 1\na 1 2\na 3 4\nend 2\n",
                "line 3: subscriber 'a' appears twice",
            ),
            (
                "lanyard-quota-state 1\na 1 2\nend 2\n",
                "line 3: end line says \"2\" accounts, the file has 1",
            ),
            (
                "lanyard-quota-state 1\nend 0\nb 1 2\n",
                "line 3: text after the end line",
            ),
            ("lanyard-quota-state 1\nend 0 0\n", "line 2: bad end line"),
        ];
        for (text, want) in cases {
            let e = parse(text.as_bytes()).unwrap_err().to_string();
            assert!(e.starts_with(want), "{text:?}: {e}");
        }
        let e = parse(b"lanyard-quota-state 1\na 1 2\xff\nend 1\n").unwrap_err();
        assert_eq!(e.to_string(), "line 2: not UTF-8 text");
    }
}
