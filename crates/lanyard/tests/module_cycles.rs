//! No module of a crate imports, directly or through others, a module that
//! imports it back (cargo already refuses cycles between crates).
//!
//! The check reads every `crates/*/src` file as text: a file is a module
//! (`a.rs` and `a/mod.rs` are `a`, `a/b.rs` is `a::b`), and each path it
//! names that starts with `crate::` or `super::` (in `use` lines and in
//! code) is an edge to the module that path lands in. Names re-exported by
//! a parent (`pub use b::X;` or `pub use b::*;`) are followed to `b`. A
//! module may use its ancestors (the crate root and `mod.rs` files are
//! façades); code under `#[cfg(test)]` is left out (unit tests may reach
//! anywhere). Run alone: `cargo test -p lanyard --test module_cycles`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Source text without comments, string/char literals and `#[cfg(test)]`
/// items.
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if b[i..].starts_with(b"/*") {
            let mut depth = 0;
            while i < b.len() {
                if b[i..].starts_with(b"/*") {
                    depth += 1;
                    i += 2;
                } else if b[i..].starts_with(b"*/") {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if b[i] == b'r' && i + 1 < b.len() && (b[i + 1] == b'"' || b[i + 1] == b'#') {
            // Raw string: r"…", r#"…"#.
            let mut j = i + 1;
            let mut hashes = 0;
            while j < b.len() && b[j] == b'#' {
                hashes += 1;
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                j += 1;
                while j < b.len() && !b[j..].starts_with(&close) {
                    j += 1;
                }
                i = j + close.len();
                out.push_str("\"\"");
            } else {
                out.push('r');
                i += 1;
            }
        } else if b[i] == b'"' {
            i += 1;
            while i < b.len() && b[i] != b'"' {
                if b[i] == b'\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if b[i] == b'\'' {
            // A char literal ('x', '\n', '\u{..}'), not a lifetime.
            let end = if i + 2 < b.len() && b[i + 1] == b'\\' {
                b[i + 2..]
                    .iter()
                    .position(|&c| c == b'\'')
                    .map(|p| i + 2 + p)
            } else if i + 2 < b.len() && b[i + 2] == b'\'' {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    out.push_str("' '");
                    i = e + 1;
                }
                None => {
                    out.push('\'');
                    i += 1;
                }
            }
        } else {
            let c = src[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    drop_cfg_test(&out)
}

/// Removes each `#[cfg(test)]` item: up to its `;` or its matching `}`.
fn drop_cfg_test(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(p) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..p]);
        let after = &rest[p..];
        let b = after.as_bytes();
        let mut depth = 0i32;
        let mut end = after.len();
        for (k, &c) in b.iter().enumerate() {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path in `s` starting at a `crate` or `super` token, with `{…}`
/// groups expanded (`crate::a::{b, c::d}` gives `crate::a::b` and
/// `crate::a::c::d`).
fn paths(s: &str) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'))
            && (matches_word(&chars, i, "crate") || matches_word(&chars, i, "super"));
        if starts {
            let (ps, end) = parse_path(&chars, i);
            out.extend(ps);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
}

fn matches_word(c: &[char], i: usize, w: &str) -> bool {
    let n = w.len();
    i + n <= c.len()
        && c[i..i + n].iter().copied().eq(w.chars())
        && (i + n == c.len() || !is_ident(c[i + n]))
}

fn skip_ws(c: &[char], mut i: usize) -> usize {
    while i < c.len() && c[i].is_whitespace() {
        i += 1;
    }
    i
}

/// Parses `seg(::seg)*(::{…})?` from `i`; returns the expanded paths and
/// where it stopped.
fn parse_path(c: &[char], mut i: usize) -> (Vec<Vec<String>>, usize) {
    let mut segs = Vec::new();
    loop {
        i = skip_ws(c, i);
        if i < c.len() && c[i] == '{' {
            let mut out = Vec::new();
            i += 1;
            loop {
                i = skip_ws(c, i);
                if i >= c.len() || c[i] == '}' {
                    i += 1;
                    break;
                }
                if c[i] == ',' {
                    i += 1;
                    continue;
                }
                let (inner, end) = parse_path(c, i);
                for p in inner {
                    let mut full = segs.clone();
                    full.extend(p);
                    out.push(full);
                }
                if end <= i {
                    i += 1;
                } else {
                    i = end;
                }
                // `as x` renames.
                i = skip_ws(c, i);
                if matches_word(c, i, "as") {
                    i += 2;
                    i = skip_ws(c, i);
                    while i < c.len() && is_ident(c[i]) {
                        i += 1;
                    }
                }
            }
            if out.is_empty() {
                out.push(segs);
            }
            return (out, i);
        }
        let start = i;
        while i < c.len() && (is_ident(c[i]) || c[i] == '*') {
            i += 1;
        }
        if i == start {
            break;
        }
        segs.push(c[start..i].iter().collect());
        let j = skip_ws(c, i);
        if j + 1 < c.len() && c[j] == ':' && c[j + 1] == ':' {
            i = j + 2;
        } else {
            break;
        }
    }
    (vec![segs], i)
}

struct CrateModules {
    /// Module → its stripped source.
    src: BTreeMap<Module, String>,
}

fn module_of(src_dir: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src_dir).unwrap_or(file);
    let mut m: Module = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = m.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !matches!(stem, "mod" | "lib" | "main") || !m.is_empty() && stem != "mod" {
        m.push(stem.to_string());
    }
    m
}

fn rs_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rs_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

impl CrateModules {
    fn read(src_dir: &Path) -> CrateModules {
        let mut files = Vec::new();
        rs_files(src_dir, &mut files);
        let mut src = BTreeMap::new();
        for f in files {
            // Binaries beside the library (src/bin, main.rs) are their own
            // crates.
            if f.starts_with(src_dir.join("bin")) {
                continue;
            }
            if f == src_dir.join("main.rs") && src_dir.join("lib.rs").exists() {
                continue;
            }
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            src.insert(module_of(src_dir, &f), strip(&text));
        }
        CrateModules { src }
    }

    /// The module a path from `from` lands in (the longest known prefix),
    /// following re-exports of the module it first lands in.
    fn resolve(&self, from: &Module, path: &[String]) -> Option<Module> {
        let mut base: Module = Vec::new();
        let mut rest = path;
        match rest.first().map(String::as_str) {
            Some("crate") => rest = &rest[1..],
            Some("super") => {
                base = from.clone();
                while rest.first().map(String::as_str) == Some("super") {
                    base.pop()?;
                    rest = &rest[1..];
                }
            }
            _ => return None,
        }
        let mut m = base;
        for seg in rest {
            let mut next = m.clone();
            next.push(seg.clone());
            if self.src.contains_key(&next) {
                m = next;
            } else {
                return Some(self.reexport(&m, seg).unwrap_or(m));
            }
        }
        Some(m)
    }

    /// Where `name`, used through module `m`, comes from if `m` re-exports
    /// it from a child.
    fn reexport(&self, m: &Module, name: &str) -> Option<Module> {
        let src = self.src.get(m)?;
        for stmt in src.split(';') {
            let t = stmt.trim();
            let Some(rest) = t.strip_prefix("pub use ") else {
                continue;
            };
            let mut rel = String::from("self::");
            rel.push_str(rest);
            let chars: Vec<char> = rel.chars().collect();
            for p in parse_path(&chars, 0).0 {
                let (last, head) = p.split_last()?;
                let head = &head[1..]; // without `self`
                if head.is_empty() {
                    continue;
                }
                let mut target = m.clone();
                target.extend(head.iter().cloned());
                if !self.src.contains_key(&target) {
                    continue;
                }
                let defines = last == name
                    || last == "*" && self.src.get(&target).is_some_and(|s| defines(s, name));
                if defines {
                    return Some(target);
                }
            }
        }
        None
    }
}

/// Whether `src` defines a public item called `name`.
fn defines(src: &str, name: &str) -> bool {
    [
        "struct", "enum", "fn", "const", "static", "type", "trait", "mod", "union",
    ]
    .iter()
    .any(|k| {
        src.contains(&format!("pub {k} {name}"))
            && src
                .split(&format!("pub {k} {name}"))
                .skip(1)
                .any(|after| !after.starts_with(|c: char| is_ident(c)))
    })
}

/// Edges between modules that are not ancestor and descendant.
fn edges(c: &CrateModules) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut g: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (m, src) in &c.src {
        for p in paths(src) {
            let Some(t) = c.resolve(m, &p) else {
                continue;
            };
            if t.starts_with(m) || m.starts_with(&t) {
                continue;
            }
            g.entry(m.clone()).or_default().insert(t);
        }
    }
    g
}

/// One cycle per strongly connected component of more than one module.
fn cycles(g: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    // Tarjan's algorithm, iterative enough for a few hundred modules.
    struct T<'a> {
        g: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<Module, usize>,
        low: BTreeMap<Module, usize>,
        stack: Vec<Module>,
        on: BTreeSet<Module>,
        next: usize,
        out: Vec<Vec<Module>>,
    }
    fn visit(t: &mut T, v: &Module) {
        t.index.insert(v.clone(), t.next);
        t.low.insert(v.clone(), t.next);
        t.next += 1;
        t.stack.push(v.clone());
        t.on.insert(v.clone());
        let succ: Vec<Module> =
            t.g.get(v)
                .map(|s| s.iter().cloned().collect())
                .unwrap_or_default();
        for w in succ {
            if !t.index.contains_key(&w) {
                visit(t, &w);
                let lw = t.low[&w];
                let lv = t.low[v];
                t.low.insert(v.clone(), lv.min(lw));
            } else if t.on.contains(&w) {
                let iw = t.index[&w];
                let lv = t.low[v];
                t.low.insert(v.clone(), lv.min(iw));
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(&w);
                let done = &w == v;
                comp.push(w);
                if done {
                    break;
                }
            }
            if comp.len() > 1 {
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    let nodes: Vec<Module> = g.keys().cloned().collect();
    for v in nodes {
        if !t.index.contains_key(&v) {
            visit(&mut t, &v);
        }
    }
    t.out
}

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn name(m: &Module) -> String {
    if m.is_empty() {
        "(root)".into()
    } else {
        m.join("::")
    }
}

#[test]
fn no_module_cycles_in_any_crate() {
    let mut found = Vec::new();
    let mut crates = 0;
    let mut modules = 0;
    let mut rd: Vec<PathBuf> = std::fs::read_dir(workspace().join("crates"))
        .expect("crates/")
        .flatten()
        .map(|e| e.path())
        .collect();
    rd.sort();
    for dir in rd {
        let src = dir.join("src");
        if !src.is_dir() {
            continue;
        }
        let c = CrateModules::read(&src);
        crates += 1;
        modules += c.src.len();
        for cyc in cycles(&edges(&c)) {
            let g = edges(&c);
            let mut desc = Vec::new();
            for a in &cyc {
                for b in &cyc {
                    if g.get(a).is_some_and(|s| s.contains(b)) {
                        desc.push(format!("{} -> {}", name(a), name(b)));
                    }
                }
            }
            found.push(format!("{}: {}", dir.display(), desc.join(", ")));
        }
    }
    assert!(
        crates >= 9 && modules >= 100,
        "read {crates} crates, {modules} modules"
    );
    assert!(found.is_empty(), "module cycles:\n{}", found.join("\n"));
}

/// The check itself finds a cycle, through a re-export and a `{…}` group,
/// and not an ancestor's use.
#[test]
fn the_check_sees_a_cycle() {
    let mut src = BTreeMap::new();
    src.insert(vec![], strip("mod a; mod b; pub use b::*;"));
    src.insert(
        vec!["a".to_string()],
        strip("use crate::{Thing, b::other as o};\n// crate::c::x\n"),
    );
    src.insert(
        vec!["b".to_string()],
        strip("pub struct Thing;\nfn f() { super::a::g(); let _ = \"crate::c\"; }\n#[cfg(test)]\nmod tests { use crate::c; }"),
    );
    src.insert(
        vec!["c".to_string()],
        strip("use super::*; use crate::a::x;"),
    );
    let c = CrateModules { src };
    let g = edges(&c);
    let cyc = cycles(&g);
    assert_eq!(cyc.len(), 1, "{g:?}");
    let mut names: Vec<String> = cyc[0].iter().map(name).collect();
    names.sort();
    assert_eq!(names, ["a", "b"]);
    assert!(g[&vec!["c".to_string()]].contains(&vec!["a".to_string()]));
    assert!(
        !g.contains_key(&vec!["b".to_string()])
            || !g[&vec!["b".to_string()]].contains(&vec!["c".to_string()])
    );
}
