//! `lab check PLAN`: a plan validated without running it, errors as
//! `FILE:LINE: field: problem`. The plan's errors name the field
//! (`tests[2].search.resolution`); this finds its line in the YAML.

use crate::plan::Plan;
use std::path::Path;
use yaml_rust2::parser::{Event, Parser};

/// A YAML node with the line (1-based) where it starts.
enum Node {
    Scalar(usize),
    Seq(usize, Vec<Node>),
    /// Entries: key, line of the key, value.
    Map(usize, Vec<(String, usize, Node)>),
}

impl Node {
    fn line(&self) -> usize {
        match self {
            Node::Scalar(l) | Node::Seq(l, _) | Node::Map(l, _) => *l,
        }
    }
}

fn node(p: &mut Parser<std::str::Chars<'_>>, first: (Event, usize)) -> Option<Node> {
    let (ev, line) = first;
    Some(match ev {
        Event::Scalar(..) | Event::Alias(_) => Node::Scalar(line),
        Event::SequenceStart(..) => {
            let mut items = Vec::new();
            loop {
                let (e, m) = p.next_token().ok()?;
                if e == Event::SequenceEnd {
                    break;
                }
                items.push(node(p, (e, m.line()))?);
            }
            Node::Seq(line, items)
        }
        Event::MappingStart(..) => {
            let mut items = Vec::new();
            loop {
                let (e, m) = p.next_token().ok()?;
                if e == Event::MappingEnd {
                    break;
                }
                let key = match &e {
                    Event::Scalar(s, ..) => s.clone(),
                    _ => String::new(),
                };
                let kl = m.line();
                // Complex keys are walked over but not named.
                if !matches!(e, Event::Scalar(..)) {
                    node(p, (e, kl))?;
                }
                let (v, vm) = p.next_token().ok()?;
                let value = node(p, (v, vm.line()))?;
                items.push((key, kl, value));
            }
            Node::Map(line, items)
        }
        _ => return None,
    })
}

fn document(text: &str) -> Option<Node> {
    let mut p = Parser::new_from_str(text);
    loop {
        let (e, m) = p.next_token().ok()?;
        match e {
            Event::StreamStart | Event::DocumentStart => continue,
            Event::StreamEnd => return None,
            e => return node(&mut p, (e, m.line())),
        }
    }
}

/// Split `tests[2].search.resolution` into keys and indices.
enum Seg {
    Key(String),
    Index(usize),
}

fn segments(path: &str) -> Vec<Seg> {
    let mut v = Vec::new();
    for part in path.split('.') {
        let mut rest = part;
        if let Some(i) = rest.find('[') {
            if i > 0 {
                v.push(Seg::Key(rest[..i].to_string()));
            }
            rest = &rest[i..];
            while let Some(r) = rest.strip_prefix('[') {
                let Some(end) = r.find(']') else { break };
                if let Ok(n) = r[..end].parse() {
                    v.push(Seg::Index(n));
                }
                rest = &r[end + 1..];
            }
        } else if !rest.is_empty() {
            v.push(Seg::Key(rest.to_string()));
        }
    }
    v
}

/// The line of the field `path` in `text`, or of the deepest part of it
/// that exists (a missing key: the entry that lacks it).
pub fn line_of(text: &str, path: &str) -> Option<usize> {
    let mut n = &document(text)?;
    let mut line = n.line();
    for s in segments(path) {
        let next =
            match (s, n) {
                (Seg::Key(k), Node::Map(_, items)) => items
                    .iter()
                    .find(|(key, _, _)| *key == k)
                    .map(|(_, kl, v)| {
                        line = *kl;
                        v
                    }),
                (Seg::Index(i), Node::Seq(_, items)) => items.get(i).inspect(|v| line = v.line()),
                _ => None,
            };
        match next {
            Some(x) => n = x,
            None => break,
        }
    }
    Some(line)
}

/// The field path at the start of a plan error (`tests[2].x: ...`).
fn error_path(msg: &str) -> Option<&str> {
    let (head, _) = msg.split_once(": ")?;
    let ok = !head.is_empty()
        && head
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "[]._-".contains(c));
    ok.then_some(head)
}

/// A YAML syntax error's "at line N column M".
fn syntax_line(msg: &str) -> Option<usize> {
    let i = msg.find("at line ")?;
    msg[i + 8..]
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Validate a plan file without running it. The error is one line,
/// `FILE:LINE: field: problem` (or `FILE: problem` when no line applies).
pub fn check_file(path: &Path) -> Result<Plan, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    check_text(&text).map_err(|(line, m)| match line {
        Some(l) => format!("{}:{l}: {m}", path.display()),
        None => format!("{}: {m}", path.display()),
    })
}

/// [`check_file`] on text: the error's line (1-based) and message.
pub fn check_text(text: &str) -> Result<Plan, (Option<usize>, String)> {
    Plan::parse(text).map_err(|e| {
        let m = match e {
            crate::LabError::Plan(m) => m,
            o => o.to_string(),
        };
        let line = error_path(&m)
            .and_then(|p| line_of(text, p))
            .or_else(|| syntax_line(&m));
        (line, m)
    })
}

/// One line saying what a valid plan will run.
pub fn describe(p: &Plan) -> String {
    let est: f64 = (0..p.tests.len())
        .filter_map(|i| p.test(i).ok())
        .map(|t| {
            crate::procs::estimate(&t) * t.duts.as_ref().map_or(p.duts.len(), |d| d.len()) as f64
        })
        .sum();
    format!(
        "plan {}: {} DUT(s), {} test(s), {} port(s); about {:.0} s of trials",
        p.name,
        p.duts.len(),
        p.tests.len(),
        p.ports_needed(),
        est
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAN: &str = "name: x
duts:
  - {name: a, driver: wire}
tests:
  - type: throughput
  - type: throughput
    search:
      resolution: 7
";

    #[test]
    fn errors_point_at_the_line() {
        let (line, m) = check_text(PLAN).unwrap_err();
        assert!(m.starts_with("tests[1].search.resolution"), "{m}");
        assert_eq!(line, Some(8), "{m}");
        // Unknown key (serde's error): its line.
        let t = PLAN.replace("resolution: 7", "resolution: 0.1\n      bogus: 1");
        let (line, m) = check_text(&t).unwrap_err();
        assert!(m.contains("bogus"), "{m}");
        assert_eq!(line, Some(9), "{m}");
        // Duplicate DUT names: the second one.
        let t = PLAN.replace(
            "  - {name: a, driver: wire}\n",
            "  - {name: a, driver: wire}\n  - {name: a, driver: ovs}\n",
        );
        let (line, m) = check_text(&t).unwrap_err();
        assert!(m.starts_with("duts[1].name"), "{m}");
        assert_eq!(line, Some(4), "{m}");
        // Syntax error.
        let (line, m) = check_text("name: [x\n").unwrap_err();
        assert!(line.is_some(), "{m}");
        assert!(check_text(&PLAN.replace("7", "0.1")).is_ok());
    }

    /// Every shipped plan, and every plan under plans/reports/, is valid.
    #[test]
    fn every_shipped_plan_checks() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../plans");
        let mut n = 0;
        for dir in [root.clone(), root.join("reports")] {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().is_some_and(|x| x == "yaml") {
                    let plan = check_file(&p).unwrap_or_else(|e| panic!("{e}"));
                    assert!(!describe(&plan).is_empty());
                    n += 1;
                }
            }
        }
        assert!(n >= 15, "{n} plans");
    }
}
