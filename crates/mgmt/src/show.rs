//! Text form of `show` commands: pure functions from the management API's
//! JSON answer to the text an operator reads, so the CLI and scripts read
//! the same source and a golden test can render any answer
//! (`tests/golden/`).
//!
//! Layout rules, after FRR's vtysh, Arista EOS and Cisco IOS: a summary line
//! first, one table with a dashed rule under its headers, totals at the
//! foot; no line wider than [`MAX_WIDTH`]; lists that do not fit wrap under
//! their column; a table too wide for one line puts its last columns on a
//! second, indented line. Nothing here prints JSON or a debug dump: a value
//! that is not a scalar or a list of scalars shows as `?`.

use serde_json::Value;
use std::fmt::Write;

/// No text line is wider than this.
pub const MAX_WIDTH: usize = 120;

// ---------------------------------------------------------------------
// Reading the API's JSON

/// A scalar as text: strings as they are, numbers, booleans as yes/no,
/// null (or absent) as `-`, a list of scalars joined with `,`.
fn text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => "-".into(),
        Some(Value::String(s)) => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Bool(b)) => if *b { "yes" } else { "no" }.into(),
        Some(Value::Array(a)) if a.is_empty() => "-".into(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::Array(_) | Value::Object(_) => "?".into(),
                x => text(Some(x)),
            })
            .collect::<Vec<_>>()
            .join(","),
        Some(Value::Object(_)) => "?".into(),
    }
}

fn s(v: &Value, k: &str) -> String {
    text(v.get(k))
}

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn opt_u(v: &Value, k: &str) -> Option<u64> {
    v.get(k).and_then(Value::as_u64)
}

fn flag(v: &Value, k: &str) -> bool {
    v.get(k).and_then(Value::as_bool) == Some(true)
}

fn rows(v: &Value) -> &[Value] {
    v.as_array().map(|a| a.as_slice()).unwrap_or(&[])
}

fn rows_at<'a>(v: &'a Value, k: &str) -> &'a [Value] {
    v.get(k).map(rows).unwrap_or(&[])
}

/// Strings of a list field (non-strings shown as text).
fn strings(v: &Value, k: &str) -> Vec<String> {
    rows_at(v, k).iter().map(|x| text(Some(x))).collect()
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Cisco-style dotted MAC (aabb.ccdd.eeff) from "aa:bb:cc:dd:ee:ff".
pub fn dotted(mac: &str) -> String {
    let h: String = mac.chars().filter(|c| *c != ':').collect();
    if h.len() != 12 {
        return mac.to_string();
    }
    format!("{}.{}.{}", &h[0..4], &h[4..8], &h[8..12])
}

/// The name of a DSCP value (RFC 2474 class selectors, RFC 2597 AF,
/// RFC 3246 EF, RFC 5865 VOICE-ADMIT), or the number.
pub fn dscp_name(d: u64) -> String {
    match d {
        0 => "default".into(),
        8 | 16 | 24 | 32 | 40 | 48 | 56 => format!("cs{}", d / 8),
        10 | 12 | 14 | 18 | 20 | 22 | 26 | 28 | 30 | 34 | 36 | 38 => {
            format!("af{}{}", d / 8, (d % 8) / 2)
        }
        44 => "voice-admit".into(),
        46 => "ef".into(),
        d => d.to_string(),
    }
}

/// A DSCP field that may be a number or already a name.
fn dscp_field(v: &Value, k: &str) -> String {
    match v.get(k) {
        Some(Value::Number(n)) => n.as_u64().map(dscp_name).unwrap_or_else(|| n.to_string()),
        x => text(x),
    }
}

/// `1 day, 2 hours, 3 minutes` (IOS `show version` style); seconds
/// under a minute.
pub fn uptime(secs: u64) -> String {
    let (d, h, m) = (secs / 86_400, secs / 3_600 % 24, secs / 60 % 60);
    let mut parts = Vec::new();
    if d > 0 {
        parts.push(plural(d, "day", "days"));
    }
    if h > 0 {
        parts.push(plural(h, "hour", "hours"));
    }
    if m > 0 || parts.is_empty() && secs >= 60 {
        parts.push(plural(m, "minute", "minutes"));
    }
    if parts.is_empty() {
        parts.push(plural(secs, "second", "seconds"));
    }
    parts.join(", ")
}

/// A table cell "age in seconds" the way `show` reads: `-` for none.
fn age(v: &Value, k: &str) -> String {
    opt_u(v, k).map_or("-".into(), |a| a.to_string())
}

/// `items` joined with `sep`, broken into lines no wider than `width`.
fn wrap(items: &[String], sep: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for (i, it) in items.iter().enumerate() {
        let piece = if i + 1 < items.len() {
            format!("{it}{}", sep.trim_end())
        } else {
            it.clone()
        };
        let add = if cur.is_empty() { 0 } else { 1 } + piece.chars().count();
        if !cur.is_empty() && cur.chars().count() + add > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(&piece);
    }
    if !cur.is_empty() || lines.is_empty() {
        lines.push(cur);
    }
    lines
}

/// `line` wrapped at spaces to [`MAX_WIDTH`], continuation lines
/// indented by `indent` spaces; a line that fits is written as it is.
fn para(o: &mut String, line: &str, indent: usize) {
    let mut rest = line.trim_end().to_string();
    loop {
        if rest.chars().count() <= MAX_WIDTH {
            let _ = writeln!(o, "{rest}");
            return;
        }
        // The last space that keeps the line within the width, past the
        // indent (else the first space after it: a long word overflows).
        let cut = rest
            .char_indices()
            .filter(|(i, c)| *c == ' ' && *i > indent && *i <= MAX_WIDTH)
            .map(|(i, _)| i)
            .next_back()
            .or_else(|| {
                rest.char_indices()
                    .find(|(i, c)| *c == ' ' && *i > indent)
                    .map(|(i, _)| i)
            });
        let Some(cut) = cut else {
            let _ = writeln!(o, "{rest}");
            return;
        };
        let _ = writeln!(o, "{}", rest[..cut].trim_end());
        rest = format!("{}{}", " ".repeat(indent), rest[cut..].trim_start());
    }
}

// ---------------------------------------------------------------------
// Tables

#[derive(Clone, Copy, PartialEq)]
enum Align {
    Left,
    Right,
}

/// A text table: headers with a dashed rule, columns as wide as their
/// widest cell. The last column may hold a list (`, `-separated) that
/// wraps under itself. When the table is wider than [`MAX_WIDTH`], the
/// columns from `split` on go to a second line of each row, indented.
struct Table {
    indent: usize,
    cols: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
    /// The row above which a second rule is drawn (totals at the foot).
    rule_before: Option<usize>,
    split: Option<usize>,
}

const GAP: &str = "  ";

impl Table {
    /// Columns by header; a header starting with `>` is right-aligned
    /// (numbers), without the `>`.
    fn new(cols: &[&'static str]) -> Table {
        Table {
            indent: 0,
            cols: cols
                .iter()
                .map(|c| match c.strip_prefix('>') {
                    Some(c) => (c, Align::Right),
                    None => (*c, Align::Left),
                })
                .collect(),
            rows: Vec::new(),
            rule_before: None,
            split: None,
        }
    }

    fn indent(mut self, n: usize) -> Table {
        self.indent = n;
        self
    }

    fn split(mut self, at: usize) -> Table {
        self.split = Some(at);
        self
    }

    fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// A last row under a rule (`Total ...`).
    fn total(&mut self, cells: Vec<String>) {
        self.rule_before = Some(self.rows.len());
        self.rows.push(cells);
    }

    fn widths(&self, cols: std::ops::Range<usize>) -> Vec<usize> {
        cols.map(|i| {
            self.rows
                .iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
                .max(self.cols[i].0.chars().count())
        })
        .collect()
    }

    fn render(&self, o: &mut String) {
        let n = self.cols.len();
        let all = Group::new(self, 0..n, self.indent);
        let groups = match self.split {
            Some(at) if all.natural > MAX_WIDTH && at > 0 && at < n => vec![
                Group::new(self, 0..at, self.indent),
                Group::new(self, at..n, self.indent + 4),
            ],
            _ => vec![all],
        };
        let heads: Vec<String> = self.cols.iter().map(|c| c.0.to_string()).collect();
        let mut head_lines = Vec::new();
        for g in &groups {
            head_lines.extend(g.line(self, &heads));
        }
        let rule = if groups.len() == 1 {
            let g = &groups[0];
            let dashes: Vec<String> = g.w.iter().map(|w| "-".repeat(*w)).collect();
            format!("{}{}", " ".repeat(g.indent), dashes.join(GAP))
        } else {
            let wide = head_lines
                .iter()
                .map(|l| l.chars().count())
                .max()
                .unwrap_or(0)
                .max(
                    groups
                        .iter()
                        .map(|g| g.start_last + g.w[g.w.len() - 1])
                        .max()
                        .unwrap_or(0),
                )
                .min(MAX_WIDTH);
            format!(
                "{}{}",
                " ".repeat(self.indent),
                "-".repeat(wide - self.indent)
            )
        };
        for l in head_lines {
            let _ = writeln!(o, "{l}");
        }
        let _ = writeln!(o, "{rule}");
        for (k, r) in self.rows.iter().enumerate() {
            if self.rule_before == Some(k) {
                let _ = writeln!(o, "{rule}");
            }
            for g in &groups {
                for l in g.line(self, r) {
                    let _ = writeln!(o, "{l}");
                }
            }
        }
    }
}

/// Columns printed on one line: their widths, and where the last starts.
struct Group {
    cols: std::ops::Range<usize>,
    indent: usize,
    w: Vec<usize>,
    start_last: usize,
    /// Width of the line without wrapping the last column.
    natural: usize,
}

impl Group {
    fn new(t: &Table, cols: std::ops::Range<usize>, indent: usize) -> Group {
        let mut w = t.widths(cols.clone());
        let k = w.len() - 1;
        let start_last = indent + w[..k].iter().sum::<usize>() + GAP.len() * k;
        let natural = start_last + w[k];
        w[k] = w[k].min(MAX_WIDTH.saturating_sub(start_last).max(12));
        Group {
            cols,
            indent,
            w,
            start_last,
            natural,
        }
    }

    /// One row's cells of this group: one line, more when the last cell
    /// is a list that wraps.
    fn line(&self, t: &Table, cells: &[String]) -> Vec<String> {
        let last = self.cols.end - 1;
        let mut head = " ".repeat(self.indent);
        for (k, i) in self.cols.clone().enumerate() {
            if i == last {
                break;
            }
            let c = cells.get(i).map(String::as_str).unwrap_or("");
            let _ = match t.cols[i].1 {
                Align::Left => write!(head, "{c:<width$}{GAP}", width = self.w[k]),
                Align::Right => write!(head, "{c:>width$}{GAP}", width = self.w[k]),
            };
        }
        let last_w = self.w[self.w.len() - 1];
        let c = cells.get(last).map(String::as_str).unwrap_or("");
        let parts: Vec<String> = if c.chars().count() > last_w && c.contains(", ") {
            let items: Vec<String> = c.split(", ").map(String::from).collect();
            wrap(&items, ", ", last_w)
        } else {
            vec![c.to_string()]
        };
        parts
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let lead = if k == 0 {
                    head.clone()
                } else {
                    " ".repeat(self.start_last)
                };
                let cell = match t.cols[last].1 {
                    Align::Right => format!("{p:>width$}", width = last_w),
                    Align::Left => p.clone(),
                };
                format!("{lead}{cell}").trim_end().to_string()
            })
            .collect()
    }
}

// ---------------------------------------------------------------------
// Renderers, one per `show` command (see `crate::cli::SHOW`)

/// `show version`.
pub fn version(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "Lanyard version {}", s(v, "version"));
    let _ = writeln!(o, "Switch name: {}", s(v, "name"));
    let _ = writeln!(o, "Uptime: {}", uptime(u(v, "uptime")));
    if v.get("kernel").is_some() {
        let _ = writeln!(o, "Kernel: Linux {}", s(v, "kernel"));
    }
    if v.get("ports").is_some() {
        let _ = writeln!(
            o,
            "Data plane: {}, {}, {}",
            plural(u(v, "ports"), "port", "ports"),
            plural(u(v, "workers"), "worker", "workers"),
            if flag(v, "bypass") {
                "bypass ON (services off)"
            } else {
                "services on"
            }
        );
    }
    if v.get("config").is_some() {
        let _ = writeln!(o, "Configuration: {}", s(v, "config"));
    }
    o
}

/// Ports in each state, for the summary line of `show interfaces`.
fn port_states(ports: &[Value]) -> String {
    // Subinterface rows follow their port's state; they are not ports.
    let ports: Vec<&Value> = ports
        .iter()
        .filter(|p| s(p, "mode") != "subinterface")
        .collect();
    let count = |st: &str| ports.iter().filter(|p| s(p, "state") == st).count() as u64;
    let mut parts = vec![
        format!("{} up", count("up")),
        format!("{} down", count("down")),
    ];
    let missing = count("missing");
    if missing > 0 {
        parts.push(format!("{missing} missing"));
    }
    format!(
        "{}: {}",
        plural(ports.len() as u64, "port", "ports"),
        parts.join(", ")
    )
}

/// The VLAN column of a port: its access VLAN, `trunk`, `routed`, or
/// `tunnel N` (802.1ad S-VLAN).
fn port_vlan(r: &Value) -> String {
    match s(r, "mode").as_str() {
        "trunk" => "trunk".into(),
        "routed" => "routed".into(),
        "subinterface" => format!("routed .{}", s(r, "vlan")),
        "dot1q-tunnel" => format!("tunnel {}", s(r, "vlan")),
        _ => s(r, "vlan"),
    }
}

/// The Backend column: `af-xdp native/copy`, `af-packet tpacket-v2+v3`, or
/// `-` before the first attach (and in answers of older versions).
fn port_backend(r: &Value) -> String {
    match r.get("backend").and_then(Value::as_str) {
        Some(b) if !b.is_empty() => match r.get("backend_mode").and_then(Value::as_str) {
            Some(m) if !m.is_empty() => format!("{b} {m}"),
            _ => b.to_string(),
        },
        _ => "-".into(),
    }
}

/// `show interfaces [PORT]` (Cisco `show interfaces status`: the VLAN
/// column says the mode too).
pub fn interfaces(v: &Value) -> String {
    let mut o = String::new();
    let ports = rows(v);
    let _ = writeln!(o, "{}", port_states(ports));
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Port",
        "Status",
        "VLAN",
        ">MTU",
        ">Ifindex",
        "Backend",
        ">RX frames",
        ">TX frames",
        ">Drops",
    ]);
    let mut errors = Vec::new();
    for r in ports {
        t.row(vec![
            s(r, "name"),
            s(r, "state"),
            port_vlan(r),
            opt_u(r, "mtu")
                .filter(|m| *m > 0)
                .map_or("-".into(), |m| m.to_string()),
            opt_u(r, "ifindex")
                .filter(|i| *i > 0)
                .map_or("-".into(), |i| i.to_string()),
            port_backend(r),
            u(r, "rx_frames").to_string(),
            u(r, "tx_frames").to_string(),
            u(r, "drops").to_string(),
        ]);
        if let Some(e) = r.get("error").and_then(Value::as_str) {
            errors.push(format!("Last error on {}: {e}", s(r, "name")));
        }
        let refused: Vec<&str> = r
            .get("busy_poll_refused")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if !refused.is_empty() {
            errors.push(format!(
                "Busy polling on {} not in effect: {}",
                s(r, "name"),
                refused.join("; ")
            ));
        }
    }
    t.render(&mut o);
    if !errors.is_empty() {
        let _ = writeln!(o);
        for e in errors {
            para(&mut o, &e, 4);
        }
    }
    o
}

/// Port names folded into ranges as `interface range` takes them:
/// `sw1-48, sw50, eth0/1-2` (names with the same prefix and consecutive
/// trailing numbers, in the order given).
pub fn name_ranges(names: &[String]) -> String {
    let split = |n: &str| -> (String, Option<u64>) {
        let digits = n.len() - n.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (p, d) = n.split_at(n.len() - digits);
        (p.to_string(), d.parse().ok())
    };
    let mut out: Vec<String> = Vec::new();
    let mut run: Option<(String, u64, u64)> = None;
    let flush = |run: &mut Option<(String, u64, u64)>, out: &mut Vec<String>| {
        if let Some((p, a, b)) = run.take() {
            out.push(if a == b {
                format!("{p}{a}")
            } else {
                format!("{p}{a}-{b}")
            });
        }
    };
    for n in names {
        match split(n) {
            (p, Some(x)) => match &mut run {
                Some((rp, _, b)) if *rp == p && *b + 1 == x => *b = x,
                _ => {
                    flush(&mut run, &mut out);
                    run = Some((p, x, x));
                }
            },
            (_, None) => {
                flush(&mut run, &mut out);
                out.push(n.clone());
            }
        }
    }
    flush(&mut run, &mut out);
    out.join(", ")
}

/// `show interfaces summary`: what a screen holds at 400 ports — ports
/// per state, per mode and VLAN, per backend, the totals, and which ports
/// are not up (as ranges).
pub fn interfaces_summary(v: &Value) -> String {
    let mut o = String::new();
    let ports = rows(v);
    let _ = writeln!(o, "{}", port_states(ports));
    let count_by = |f: &dyn Fn(&Value) -> String| {
        let mut m: std::collections::BTreeMap<String, u64> = Default::default();
        for p in ports {
            *m.entry(f(p)).or_default() += 1;
        }
        m
    };
    let _ = writeln!(o);
    let mut t = Table::new(&["VLAN", ">Ports", ">Up"]);
    let mut by_vlan: std::collections::BTreeMap<(u8, u64, String), (u64, u64)> = Default::default();
    for p in ports {
        let label = port_vlan(p);
        // Numeric VLANs first, in order; then trunk, routed, tunnels.
        let key = match label.parse::<u64>() {
            Ok(n) => (0, n, label),
            Err(_) => (1, 0, label),
        };
        let e = by_vlan.entry(key).or_default();
        e.0 += 1;
        e.1 += u64::from(s(p, "state") == "up");
    }
    for ((_, _, label), (n, up)) in by_vlan {
        t.row(vec![label, n.to_string(), up.to_string()]);
    }
    t.render(&mut o);
    let _ = writeln!(o);
    let backends = count_by(&|p| port_backend(p));
    let line: Vec<String> = backends.iter().map(|(b, n)| format!("{n} {b}")).collect();
    let _ = writeln!(o, "Backends: {}", line.join(", "));
    let total = |k: &str| ports.iter().map(|p| u(p, k)).sum::<u64>();
    let _ = writeln!(
        o,
        "Frames: {} received, {} sent, {} dropped",
        total("rx_frames"),
        total("tx_frames"),
        total("drops")
    );
    for st in ["down", "missing"] {
        let names: Vec<String> = ports
            .iter()
            .filter(|p| s(p, "state") == st)
            .map(|p| s(p, "name"))
            .collect();
        if !names.is_empty() {
            para(&mut o, &format!("Ports {st}: {}", name_ranges(&names)), 4);
        }
    }
    o
}

/// `show interfaces trunk`: trunk and 802.1ad tunnel ports, their
/// native VLAN, TPID and the VLANs they carry.
pub fn interfaces_trunk(v: &Value) -> String {
    let mut o = String::new();
    let trunks: Vec<&Value> = rows(v)
        .iter()
        .filter(|r| matches!(s(r, "mode").as_str(), "trunk" | "dot1q-tunnel"))
        .collect();
    let _ = writeln!(
        o,
        "{}",
        plural(trunks.len() as u64, "trunk port", "trunk ports")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&["Port", "Mode", "Status", "Native", "TPID", "VLANs carried"]);
    for r in trunks {
        t.row(vec![
            s(r, "name"),
            s(r, "mode"),
            s(r, "state"),
            if s(r, "mode") == "trunk" {
                s(r, "vlan")
            } else {
                "-".into()
            },
            s(r, "tpid"),
            s(r, "vlans").replace(',', ", "),
        ]);
    }
    t.render(&mut o);
    o
}

/// `show vlan`.
pub fn vlans(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{}", plural(rows(v).len() as u64, "VLAN", "VLANs"));
    let _ = writeln!(
        o,
        "Ports: (T) tagged; (down) link down; (missing) no such interface"
    );
    let _ = writeln!(o);
    let mut t = Table::new(&["VLAN", "Name", "Learning", ">Limit", ">MACs", "Ports"]);
    for r in rows(v) {
        let ports: Vec<String> = rows_at(r, "ports")
            .iter()
            .map(|p| {
                let mut n = s(p, "name");
                if flag(p, "tagged") {
                    n.push_str("(T)");
                }
                // The state of `show interfaces`; older answers say only up.
                let state = match p.get("state").and_then(Value::as_str) {
                    Some(st) => st.to_string(),
                    None if flag(p, "up") => "up".into(),
                    None => "down".into(),
                };
                if state != "up" {
                    n.push_str(&format!("({state})"));
                }
                n
            })
            .collect();
        let name = match r.get("name") {
            Some(Value::String(n)) => n.clone(),
            _ if u(r, "vlan") == 1 => "default".into(),
            _ => format!("VLAN{:04}", u(r, "vlan")),
        };
        t.row(vec![
            u(r, "vlan").to_string(),
            name,
            if flag(r, "learning") { "on" } else { "off" }.into(),
            s(r, "limit"),
            u(r, "macs").to_string(),
            if ports.is_empty() {
                "-".into()
            } else {
                ports.join(", ")
            },
        ]);
    }
    t.render(&mut o);
    o
}

/// `show mac address-table [...]`.
pub fn mac_table(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "          Mac Address Table");
    let _ = writeln!(o, "-------------------------------------------");
    let _ = writeln!(o);
    let mut t = Table::new(&["Vlan", "Mac Address", "Type", "Ports", ">Age (s)"]);
    for r in rows(v) {
        t.row(vec![
            u(r, "vlan").to_string(),
            dotted(&s(r, "mac")),
            s(r, "type").to_uppercase(),
            s(r, "port"),
            age(r, "age"),
        ]);
    }
    t.render(&mut o);
    let _ = writeln!(
        o,
        "Total Mac Addresses for this criterion: {}",
        rows(v).len()
    );
    o
}

/// `show mac address-table [vlan N] count`.
pub fn mac_count(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Total Mac Addresses: {} ({} dynamic, {} static) of {}",
        u(v, "total"),
        u(v, "dynamic"),
        u(v, "static"),
        u(v, "capacity")
    );
    let _ = writeln!(
        o,
        "Total Mac Address Space Available: {}",
        u(v, "capacity").saturating_sub(u(v, "total"))
    );
    let _ = writeln!(o);
    let mut t = Table::new(&["Vlan", ">Dynamic", ">Static", ">Total", ">Learning limit"]);
    for r in rows_at(v, "vlans") {
        t.row(vec![
            u(r, "vlan").to_string(),
            u(r, "dynamic").to_string(),
            u(r, "static").to_string(),
            u(r, "count").to_string(),
            s(r, "limit"),
        ]);
    }
    t.render(&mut o);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Learning: {} learned, {} moves, {} aged",
        u(v, "learned"),
        u(v, "moves"),
        u(v, "aged")
    );
    let _ = writeln!(
        o,
        "Refused: {} over a limit, {} table full; {} learn-queue overflows",
        u(v, "limit_refused"),
        u(v, "table_full"),
        u(v, "learn_queue_full")
    );
    o
}

/// Non-zero counters of an object `{name: n}`, largest first.
fn nonzero(d: Option<&Value>) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = d
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, n)| n.as_u64().filter(|n| *n > 0).map(|n| (k.clone(), n)))
                .collect()
        })
        .unwrap_or_default();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

fn drop_total(d: Option<&Value>) -> u64 {
    nonzero(d).iter().map(|(_, n)| n).sum()
}

/// One row of numbers per port (`nums` gives them) under `cols` (the
/// port's name first), totals at the foot.
fn per_port_totals(
    cols: &[&'static str],
    ports: &[Value],
    nums: impl Fn(&Value) -> Vec<u64>,
) -> Table {
    let mut t = Table::new(cols);
    let mut tot = vec![0u64; cols.len() - 1];
    for r in ports {
        let c = nums(r);
        for (t, x) in tot.iter_mut().zip(&c) {
            *t += x;
        }
        let mut cells = vec![s(r, "name")];
        cells.extend(c.iter().map(u64::to_string));
        t.row(cells);
    }
    let mut cells = vec!["Total".to_string()];
    cells.extend(tot.iter().map(u64::to_string));
    t.total(cells);
    t
}

fn port_counter_table(ports: &[Value]) -> Table {
    let cols = [
        "Port",
        ">RX frames",
        ">RX bytes",
        ">TX frames",
        ">TX bytes",
        ">RX flooded",
        ">TX flooded",
        ">Drops",
    ];
    per_port_totals(&cols, ports, |r| {
        vec![
            u(r, "rx_frames"),
            u(r, "rx_bytes"),
            u(r, "tx_frames"),
            u(r, "tx_bytes"),
            u(r, "rx_flooded"),
            u(r, "tx_flooded"),
            drop_total(r.get("drops")),
        ]
    })
}

/// `Drops by reason` lines: one row per (what, reason) with frames.
fn drop_reasons(o: &mut String, title: &'static str, items: &[(String, Option<&Value>)]) {
    let mut t = Table::new(&[title, "Reason", ">Frames"]);
    for (name, d) in items {
        for (reason, n) in nonzero(*d) {
            t.row(vec![name.clone(), reason, n.to_string()]);
        }
    }
    if t.rows.is_empty() {
        let _ = writeln!(o, "No drops.");
    } else {
        t.render(o);
    }
}

/// `show interfaces counters`.
pub fn interfaces_counters(v: &Value) -> String {
    let mut o = String::new();
    let ports = rows_at(v, "ports");
    // Laid out as IOS's `show interfaces counters`: receive, then send.
    const IN: [&str; 5] = [
        "Port",
        ">InOctets",
        ">InUcastPkts",
        ">InMcastPkts",
        ">InBcastPkts",
    ];
    const OUT: [&str; 5] = [
        "Port",
        ">OutOctets",
        ">OutUcastPkts",
        ">OutMcastPkts",
        ">OutBcastPkts",
    ];
    for (dir, cols) in [("rx", IN), ("tx", OUT)] {
        let t = per_port_totals(&cols, ports, |r| {
            let frames = u(r, &format!("{dir}_frames"));
            let mcast = u(r, &format!("{dir}_multicast"));
            let bcast = u(r, &format!("{dir}_broadcast"));
            vec![
                u(r, &format!("{dir}_bytes")),
                frames.saturating_sub(mcast + bcast),
                mcast,
                bcast,
            ]
        });
        if dir == "tx" {
            let _ = writeln!(o);
        }
        t.render(&mut o);
    }
    o
}

/// `show interfaces counters errors`: drops per port and reason.
pub fn interfaces_errors(v: &Value) -> String {
    let mut o = String::new();
    let items: Vec<(String, Option<&Value>)> = rows_at(v, "ports")
        .iter()
        .map(|p| (s(p, "name"), p.get("drops")))
        .collect();
    drop_reasons(&mut o, "Port", &items);
    o
}

/// `show counters`: ports, VLANs, drops by reason, routing.
pub fn counters(v: &Value) -> String {
    let mut o = String::new();
    port_counter_table(rows_at(v, "ports")).render(&mut o);
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "VLAN",
        ">RX frames",
        ">RX bytes",
        ">TX frames",
        ">TX bytes",
        ">Flooded",
        ">Drops",
    ]);
    for r in rows_at(v, "vlans") {
        t.row(vec![
            u(r, "vlan").to_string(),
            u(r, "rx_frames").to_string(),
            u(r, "rx_bytes").to_string(),
            u(r, "tx_frames").to_string(),
            u(r, "tx_bytes").to_string(),
            u(r, "flooded").to_string(),
            drop_total(r.get("drops")).to_string(),
        ]);
    }
    t.render(&mut o);
    let _ = writeln!(o);
    let mut items: Vec<(String, Option<&Value>)> = rows_at(v, "ports")
        .iter()
        .map(|p| (s(p, "name"), p.get("drops")))
        .collect();
    items.extend(
        rows_at(v, "vlans")
            .iter()
            .map(|x| (format!("vlan {}", u(x, "vlan")), x.get("drops"))),
    );
    let l3 = &v["l3"];
    if l3.is_object() {
        items.push(("routing".into(), l3.get("drops")));
    }
    drop_reasons(&mut o, "Where", &items);
    if l3.is_object() {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "Routing: {} received, {} forwarded, {} punted ({} punt-queue full), {} injected",
            u(l3, "rx_frames"),
            u(l3, "forwarded"),
            u(l3, "punted"),
            u(l3, "punt_queue_full"),
            u(l3, "injected")
        );
        let punts: Vec<String> = nonzero(l3.get("punts"))
            .into_iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        para(
            &mut o,
            &format!(
                "  Punts: {}",
                if punts.is_empty() {
                    "none".into()
                } else {
                    punts.join(", ")
                }
            ),
            9,
        );
        let icmp: Vec<String> = nonzero(l3.get("icmp_requested"))
            .into_iter()
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        para(
            &mut o,
            &format!(
                "  ICMP errors: {} sent, {} suppressed by control-plane policing{}",
                u(l3, "icmp_sent"),
                u(l3, "icmp_suppressed"),
                if icmp.is_empty() {
                    String::new()
                } else {
                    format!(" (asked for: {})", icmp.join(", "))
                }
            ),
            4,
        );
        if let Some(k) = l3.get("vrf_kernel").filter(|k| k.is_object()) {
            let _ = writeln!(
                o,
                "  From VRF kernels: {} to the gateway, {} routed, {} dropped (no route)",
                u(k, "received"),
                u(k, "routed"),
                u(k, "no_route")
            );
        }
        let _ = writeln!(
            o,
            "  Neighbours: {} updates from the kernel, {} resyncs, {} refused (table full)",
            u(l3, "neighbor_updates"),
            u(l3, "neighbor_resyncs"),
            u(l3, "neighbor_table_full")
        );
        if let Some(m) = l3.get("managed_neighbors").filter(|m| m.is_object()) {
            para(&mut o, &format!("  {}", managed_line(m)), 4);
        }
    }
    o
}

/// The next hops held as managed neighbours (docs/routing.md).
fn managed_line(m: &Value) -> String {
    if m.get("supported").and_then(Value::as_bool) == Some(false) {
        return "Managed next hops: off (Linux before 5.16, or LANYARD_MANAGED_NEIGHBORS=off)"
            .into();
    }
    let mut s = format!(
        "Managed next hops: {} held, {} added, {} released, {} re-added (dropped by the kernel)",
        u(m, "held"),
        u(m, "added"),
        u(m, "released"),
        u(m, "readded")
    );
    for (k, what) in [
        ("bridged", "forwarded to their last MAC while re-made"),
        ("left_alone", "left alone (static/peer)"),
        ("over_limit", "over the limit"),
        ("errors", "refused"),
    ] {
        if u(m, k) > 0 {
            s.push_str(&format!(", {} {what}", u(m, k)));
        }
    }
    s
}

/// `show ip interface`.
pub fn ip_interfaces(v: &Value) -> String {
    let mut o = String::new();
    let up = rows(v).iter().filter(|r| s(r, "state") == "up").count();
    let _ = writeln!(
        o,
        "{}, {up} up",
        plural(
            rows(v).len() as u64,
            "routed interface",
            "routed interfaces"
        )
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Interface",
        "Status",
        "TAP",
        "Router MAC",
        ">MTU",
        "uRPF",
        "Addresses",
    ]);
    for r in rows(v) {
        let mut addrs = strings(r, "addresses");
        if r.get("link_local").is_some_and(|l| !l.is_null()) {
            addrs.push(s(r, "link_local"));
        }
        t.row(vec![
            s(r, "name"),
            s(r, "state"),
            s(r, "tap"),
            dotted(&s(r, "mac")),
            u(r, "mtu").to_string(),
            s(r, "urpf"),
            addrs.join(", "),
        ]);
    }
    t.render(&mut o);
    o
}

/// Route codes as on FRR and IOS: C connected, S static, O OSPF, B BGP.
fn route_code(source: &str) -> &'static str {
    match source {
        "connected" => "C",
        "static" | "frr-static" | "kernel-static" => "S",
        "ospf" => "O",
        "bgp" => "B",
        "isis" => "i",
        "rip" | "ripng" => "R",
        "kernel" => "K",
        "babel" => "A",
        "eigrp" => "D",
        "nhrp" => "N",
        "openfabric" => "f",
        _ => "?",
    }
}

const ROUTE_CODES: &str =
    "Codes: C - connected, S - static, O - OSPF, B - BGP, i - IS-IS, R - RIP, \
K - kernel (via FRR), ? - other\n       * - installed in the FIB, ! - no usable next hop";

/// `show vrf`.
pub fn vrfs(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}, the default one included",
        plural(rows(v).len() as u64, "VRF", "VRFs")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Name",
        ">Table",
        "RD",
        "Namespace",
        ">IPv4",
        ">IPv6",
        ">Refused",
        ">Neighbors",
        "Interfaces",
    ]);
    let mut refused = 0;
    for r in rows(v) {
        refused += u(r, "refused");
        let dash = |k: &str| match r.get(k).and_then(Value::as_str) {
            Some(x) => x.to_string(),
            None => "-".to_string(),
        };
        let ifs = strings(r, "interfaces");
        t.row(vec![
            s(r, "name"),
            u(r, "table").to_string(),
            dash("rd"),
            dash("namespace"),
            u(r, "routes_v4").to_string(),
            u(r, "routes_v6").to_string(),
            u(r, "refused").to_string(),
            u(r, "neighbors").to_string(),
            if ifs.is_empty() {
                "-".to_string()
            } else {
                ifs.join(", ")
            },
        ]);
    }
    t.render(&mut o);
    if refused > 0 {
        let _ = writeln!(
            o,
            "\nRefused: route and label updates a VRF's FIB could not take (routes, next hops, \
             NHLFEs full; bad input);\n    `show ip route vrf NAME summary` has the limits."
        );
    }
    o
}

/// `show ip route [vrf NAME] [PREFIX | ADDRESS]` and `show ipv6 route ...`.
pub fn routes(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{ROUTE_CODES}");
    let _ = writeln!(o);
    if let Some(name) = v.get("vrf").and_then(Value::as_str) {
        let _ = writeln!(o, "VRF {name} (table {}):", u(v, "table"));
        let _ = writeln!(o);
    }
    let v = v.get("routes").unwrap_or(v);
    let width = rows(v)
        .iter()
        .map(|r| s(r, "prefix").chars().count())
        .max()
        .unwrap_or(0)
        .max(18);
    let mut installed = 0;
    for r in rows(v) {
        let flag_ch = if flag(r, "installed") {
            installed += 1;
            "*"
        } else if flag(r, "unresolvable") {
            "!"
        } else {
            " "
        };
        let src = s(r, "source");
        let code = route_code(&src);
        let prefix = s(r, "prefix");
        let lead = format!("{code}{flag_ch} {prefix:<width$}");
        if flag(r, "blackhole") {
            let _ = writeln!(o, "{lead}  [{src}] blackhole");
            continue;
        }
        let hops = rows_at(r, "nexthops");
        // A static VPN route: the remote PE and its label, then the
        // transport as the default VRF resolved it (or why not).
        let vpn = r
            .get("vpn")
            .map(|v| format!("VPN to {} label {}", s(v, "remote_pe"), u(v, "label")));
        if hops.is_empty() {
            match &vpn {
                Some(vpn) => {
                    let _ = writeln!(o, "{lead}  [{src}] {vpn}: inactive, remote PE unreachable");
                }
                None => {
                    let _ = writeln!(o, "{lead}  [{src}] no next hop");
                }
            }
        } else if let Some(vpn) = &vpn {
            let _ = writeln!(o, "{lead}  [{src}] {vpn}");
        }
        for (k, h) in hops.iter().enumerate() {
            let mut via = match h.get("gateway").and_then(Value::as_str) {
                Some(g) => format!("via {g}, {}", s(h, "interface")),
                None => format!("is directly connected, {}", s(h, "interface")),
            };
            if let Some(l) = h.get("labels").and_then(Value::as_array) {
                let l: Vec<String> = l.iter().map(|x| x.to_string()).collect();
                via.push_str(&format!(", label {}", l.join("/")));
            }
            let w = if hops.len() > 1 {
                format!(", weight {}", u(h, "weight").max(1))
            } else {
                String::new()
            };
            if k == 0 && vpn.is_none() {
                let _ = writeln!(o, "{lead}  [{src}] {via}{w}");
            } else {
                let pad = 3 + width + 2 + src.chars().count() + 3;
                let _ = writeln!(o, "{:pad$}{via}{w}", "");
            }
        }
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Total: {}, {installed} installed",
        plural(rows(v).len() as u64, "route", "routes")
    );
    o
}

/// What a route source is, for the foot of `show ip route summary`.
fn source_note(src: &str) -> Option<&'static str> {
    match src {
        "connected" => Some("connected: subnets of Lanyard's routed ports and VLAN interfaces"),
        "static" => Some("static: routing.static-routes in Lanyard's configuration"),
        "kernel" => Some(
            "kernel: routes zebra found in the kernel and sent over FPM, mostly the ly-* TAPs' \
own subnets (Lanyard's connected routes win: not installed)",
        ),
        "frr-static" => Some("frr-static: FRR's staticd (ip route in frr.conf)"),
        _ => None,
    }
}

/// `show ip route summary` (FRR's layout): routes per source, totals at
/// the foot, then the FIB's resources and the FPM session.
pub fn route_summary(v: &Value) -> String {
    let mut o = String::new();
    let mut t = Table::new(&["Route Source", ">Routes", ">FIB"]);
    let mut notes = Vec::new();
    for r in rows_at(v, "sources") {
        let src = s(r, "source");
        let from_frr = !matches!(src.as_str(), "connected" | "static");
        t.row(vec![
            if from_frr {
                format!("{src} (FRR)")
            } else {
                src.clone()
            },
            u(r, "routes").to_string(),
            u(r, "installed").to_string(),
        ]);
        if let Some(n) = source_note(&src) {
            notes.push(n);
        }
    }
    t.total(vec![
        "Totals".into(),
        u(v, "prefixes").to_string(),
        u(v, "installed").to_string(),
    ]);
    t.render(&mut o);
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Routes counts every source's route (one prefix may have several); FIB counts the prefixes installed."
    );
    for n in notes {
        para(&mut o, n, 4);
    }
    let _ = writeln!(o);
    let lpm = v.get("lpm").cloned().unwrap_or(Value::Null);
    let _ = writeln!(
        o,
        "FIB: {} of at most {} routes; {} without a usable next hop",
        u(v, "prefixes"),
        s(v, "max_routes"),
        u(v, "unresolvable")
    );
    let _ = writeln!(
        o,
        "     next hops {} of {}, ECMP groups {} of {}; lookup structure {} nodes, {} KiB",
        u(v, "next_hops"),
        u(v, "next_hop_capacity"),
        u(v, "groups"),
        u(v, "group_capacity"),
        u(&lpm, "nodes"),
        (u(&lpm, "lookup_bytes") + u(&lpm, "control_bytes")) / 1024
    );
    if let Some(h) = lpm.get("huge_bytes").and_then(Value::as_u64) {
        let _ = writeln!(
            o,
            "     lookup memory on 2 MB pages: {} KiB (every 2 MB page it touches)",
            h / 1024
        );
    }
    let c = v.get("counters").cloned().unwrap_or(Value::Null);
    let refused: Vec<String> = nonzero(Some(&c))
        .into_iter()
        .map(|(k, n)| format!("{} {n}", k.replace('_', "-")))
        .collect();
    if !refused.is_empty() {
        para(
            &mut o,
            &format!("     updates refused or skipped: {}", refused.join(", ")),
            5,
        );
    }
    match v.get("fpm") {
        Some(f) if f.is_object() => {
            let _ = writeln!(o);
            let state = match f.get("connected").and_then(Value::as_bool) {
                Some(true) => "zebra connected",
                Some(false) => "zebra not connected",
                None => "listening",
            };
            let _ = writeln!(
                o,
                "FPM {}: {state}, {} since start",
                s(f, "address"),
                plural(u(f, "connections"), "connection", "connections")
            );
            let _ = writeln!(
                o,
                "     received {} frames ({} bytes), {} netlink messages",
                u(f, "frames"),
                u(f, "bytes"),
                u(f, "messages")
            );
            let _ = writeln!(
                o,
                "     routes {} added, {} removed; next-hop objects {} added, {} removed",
                u(f, "routes_added"),
                u(f, "routes_removed"),
                u(f, "nexthops_added"),
                u(f, "nexthops_removed")
            );
            let _ = writeln!(
                o,
                "     {} ignored (MPLS, MACs, other tables), {} decode errors, {} framing errors",
                u(f, "ignored"),
                u(f, "decode_errors"),
                u(f, "frame_errors")
            );
        }
        _ => {
            let _ = writeln!(o);
            let _ = writeln!(o, "FPM: off (routing.fpm is not configured)");
        }
    }
    o
}

/// `show arp` / `show ipv6 neighbors`.
pub fn neighbors(v: &Value) -> String {
    let mut o = String::new();
    let mut t = Table::new(&["Address", ">Age (s)", "MAC Address", "State", "Interface"]);
    for r in rows(v) {
        t.row(vec![
            s(r, "address"),
            age(r, "age"),
            dotted(&s(r, "mac")),
            s(r, "state"),
            s(r, "interface"),
        ]);
    }
    t.render(&mut o);
    let _ = writeln!(
        o,
        "Total: {}",
        plural(rows(v).len() as u64, "entry", "entries")
    );
    o
}

/// The `compiled:` line of an access list, from the classifier's
/// statistics (`memory-bytes`, `tables`, `buckets`, ...).
fn acl_compiled(c: &Value) -> String {
    let mut parts = vec![
        plural(u(c, "tables"), "hash table", "hash tables"),
        format!(
            "{} (largest {})",
            plural(u(c, "buckets"), "bucket", "buckets"),
            u(c, "largest-bucket")
        ),
        format!("{} KiB", u(c, "memory-bytes").div_ceil(1024)),
    ];
    // Only large classifiers (1 MiB or more) are on 2 MB pages.
    match c.get("huge-bytes") {
        Some(Value::Number(h)) => parts.push(format!(
            "{} KiB on 2 MB pages",
            h.as_u64().unwrap_or(0).div_ceil(1024)
        )),
        Some(_) => parts.push("2 MB pages unknown".to_string()),
        None => {}
    }
    if u(c, "overflow-rules") > 0 {
        parts.push(format!("{} rules checked linearly", u(c, "overflow-rules")));
    }
    if u(c, "unmatchable") > 0 {
        parts.push(format!("{} rules can never match", u(c, "unmatchable")));
    }
    if u(c, "shadowed") > 0 {
        parts.push(format!(
            "{} rules shadowed by earlier ones",
            u(c, "shadowed")
        ));
    }
    parts.join(", ")
}

/// "IPv4", "IPv6", "MAC" for a list's `type`.
fn acl_kind(l: &Value) -> String {
    match s(l, "type").as_str() {
        "ipv4" => "IPv4".to_string(),
        "ipv6" => "IPv6".to_string(),
        "mac" => "MAC".to_string(),
        t => t.to_string(),
    }
}

/// A list's rules with their matches, the count of rules not shown
/// (`hint` says how to see them) and the implicit deny.
fn acl_rules(o: &mut String, l: &Value, hint: &str) {
    let entries = rows_at(l, "entries");
    for e in entries {
        let seq = opt_u(e, "seq").map_or(String::new(), |q| format!("{q} "));
        let remark = match e.get("remark").and_then(Value::as_str) {
            Some(r) => format!("  ! {r}"),
            None => String::new(),
        };
        para(
            o,
            &format!(
                "    {seq}{} ({}){remark}",
                s(e, "rule"),
                plural(u(e, "hits"), "match", "matches")
            ),
            8,
        );
    }
    let hidden = u(l, "rules").saturating_sub(entries.len() as u64);
    if hidden > 0 {
        let rules = if hidden == 1 { "rule" } else { "rules" };
        let _ = writeln!(o, "    ... {hidden} more {rules} without matches {hint}");
    }
    let _ = writeln!(
        o,
        "    implicit deny ({})",
        plural(u(l, "implicit-deny-hits"), "match", "matches")
    );
}

/// `show access-lists [NAME] [all]`. Rules are listed in configuration
/// order, with a sequence number only when the configuration gave one.
pub fn access_lists(v: &Value) -> String {
    let mut o = String::new();
    if rows(v).is_empty() {
        o.push_str("No access lists configured.\n");
        return o;
    }
    for (k, l) in rows(v).iter().enumerate() {
        if k > 0 {
            let _ = writeln!(o);
        }
        let kind = acl_kind(l);
        let _ = writeln!(
            o,
            "{kind} access list {}: {}",
            s(l, "name"),
            plural(u(l, "rules"), "rule", "rules")
        );
        let attached = strings(l, "attached");
        if attached.is_empty() {
            let _ = writeln!(o, "    not attached");
        } else {
            let lines = wrap(&attached, ", ", MAX_WIDTH - 16);
            for (i, line) in lines.iter().enumerate() {
                let _ = writeln!(
                    o,
                    "    {:<12}{line}",
                    if i == 0 { "attached on" } else { "" }
                );
            }
        }
        if let Some(c) = l.get("compiled").filter(|c| c.is_object()) {
            para(&mut o, &format!("    compiled: {}", acl_compiled(c)), 14);
        }
        acl_rules(
            &mut o,
            l,
            &format!("(show access-lists {} all)", s(l, "name")),
        );
    }
    o
}

/// `show access-lists interface PORT` / `vlan N`: the lists attached
/// there, with the hits counted at that attachment only.
pub fn access_lists_attached(v: &Value) -> String {
    let mut o = String::new();
    if rows(v).is_empty() {
        o.push_str("No access lists attached here.\n");
        return o;
    }
    for (k, l) in rows(v).iter().enumerate() {
        if k > 0 {
            let _ = writeln!(o);
        }
        let place = match l.get("interface").and_then(Value::as_str) {
            Some(p) => p.to_string(),
            None => format!("vlan {}", u(l, "vlan")),
        };
        let dir = if s(l, "direction") == "out" {
            "outbound"
        } else {
            "inbound"
        };
        let kind = acl_kind(l);
        let _ = writeln!(
            o,
            "{kind} access list {} on {place} {dir}: {}, {} here",
            s(l, "name"),
            plural(u(l, "rules"), "rule", "rules"),
            plural(u(l, "matches"), "match", "matches")
        );
        acl_rules(&mut o, l, "here (add `all`)");
    }
    o
}

/// `show policy-map interface [PORT]` (IOS layout: port, policy, class
/// blocks).
pub fn policy_maps(v: &Value) -> String {
    let mut o = String::new();
    if rows(v).is_empty() {
        o.push_str("No service policies attached.\n");
        return o;
    }
    let mut last_port = String::new();
    for p in rows(v) {
        let port = s(p, "port");
        if port != last_port {
            if !last_port.is_empty() {
                let _ = writeln!(o);
            }
            let _ = writeln!(o, "{port}");
            last_port = port;
        }
        let _ = writeln!(
            o,
            "  Service-policy {}: {}",
            if s(p, "direction") == "in" {
                "input"
            } else {
                "output"
            },
            s(p, "policy")
        );
        for c in rows_at(p, "classes") {
            let _ = writeln!(o, "    Class {}", s(c, "class"));
            let _ = writeln!(
                o,
                "      {}, {}",
                plural(u(c, "packets"), "packet", "packets"),
                plural(u(c, "bytes"), "byte", "bytes")
            );
            if c.get("set-dscp").is_some_and(|x| !x.is_null()) {
                let _ = writeln!(o, "      set dscp {}", dscp_field(c, "set-dscp"));
            }
            if c.get("set-pcp").is_some_and(|x| !x.is_null()) {
                let _ = writeln!(o, "      set cos {}", s(c, "set-pcp"));
            }
            if let Some(q) = c.get("queue").filter(|x| x.is_object()) {
                let kind = if flag(q, "priority") {
                    "strict priority".to_string()
                } else {
                    format!("weight {}", u(q, "weight"))
                };
                let _ = writeln!(
                    o,
                    "      queue: {kind}, depth {}, {} tail drops",
                    u(q, "depth"),
                    u(q, "drops")
                );
            }
            if let Some(pol) = c.get("police").filter(|x| x.is_object()) {
                let _ = writeln!(
                    o,
                    "      police: cir {} bps, bc {} bytes, pir {} bps, be {} bytes",
                    u(pol, "cir"),
                    u(pol, "cbs"),
                    u(pol, "pir"),
                    u(pol, "pbs")
                );
                let _ = writeln!(
                    o,
                    "        conformed {}, exceeded {}, violated {} packets; {} dropped",
                    u(pol, "conform"),
                    u(pol, "exceed"),
                    u(pol, "violate"),
                    u(pol, "dropped")
                );
            }
        }
    }
    o
}

fn proto_name(p: u64) -> String {
    match p {
        1 => "icmp".into(),
        2 => "igmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        47 => "gre".into(),
        50 => "esp".into(),
        58 => "icmp6".into(),
        89 => "ospf".into(),
        103 => "pim".into(),
        132 => "sctp".into(),
        p => p.to_string(),
    }
}

/// `show flow cache [top N]`.
pub fn flow_cache(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Flow export to {} ({}): active timeout {} s, inactive timeout {} s, sampling 1 in {}",
        s(v, "collector"),
        s(v, "version"),
        u(v, "active-timeout"),
        u(v, "inactive-timeout"),
        u(v, "sampling").max(1)
    );
    if let Some(e) = v.get("export").filter(|e| e.is_object()) {
        let _ = writeln!(
            o,
            "Exported: {} in {} ({} bytes), {} template sends; {} send errors, {} records lost",
            plural(u(e, "records"), "record", "records"),
            plural(u(e, "datagrams"), "datagram", "datagrams"),
            u(e, "bytes"),
            u(e, "templates"),
            u(e, "send-errors"),
            u(e, "records-lost")
        );
    }
    let _ = writeln!(o);
    let mut w = Table::new(&[
        "Worker",
        ">Flows",
        ">Capacity",
        ">Memory (MiB)",
        ">Huge pages (MiB)",
        ">Cache full",
        ">Queued",
    ]);
    // MiB of the cache on huge pages; "-" when the switch could not tell.
    let huge = |x: &Value| match x.get("huge-bytes").and_then(Value::as_u64) {
        Some(b) => (b >> 20).to_string(),
        None => "-".into(),
    };
    for x in rows_at(v, "workers") {
        w.row(vec![
            u(x, "worker").to_string(),
            u(x, "flows").to_string(),
            u(x, "capacity").to_string(),
            (u(x, "memory-bytes") >> 20).to_string(),
            huge(x),
            u(x, "cache-full").to_string(),
            u(x, "queued").to_string(),
        ]);
    }
    let workers = rows_at(v, "workers");
    let flows: u64 = workers.iter().map(|x| u(x, "flows")).sum();
    w.total(vec![
        "Total".into(),
        flows.to_string(),
        workers
            .iter()
            .map(|x| u(x, "capacity"))
            .sum::<u64>()
            .to_string(),
        (workers.iter().map(|x| u(x, "memory-bytes")).sum::<u64>() >> 20).to_string(),
        if workers
            .iter()
            .all(|x| x.get("huge-bytes").is_some_and(Value::is_u64))
        {
            (workers.iter().map(|x| u(x, "huge-bytes")).sum::<u64>() >> 20).to_string()
        } else {
            "-".into()
        },
        workers
            .iter()
            .map(|x| u(x, "cache-full"))
            .sum::<u64>()
            .to_string(),
        workers
            .iter()
            .map(|x| u(x, "queued"))
            .sum::<u64>()
            .to_string(),
    ]);
    w.render(&mut o);
    let _ = writeln!(o);
    let top = rows_at(v, "top");
    let _ = writeln!(o, "Largest flows by bytes ({} of {flows}):", top.len());
    let mut t = Table::new(&[
        "Source",
        ">Sport",
        "Destination",
        ">Dport",
        "Proto",
        "DSCP",
        "In",
        "Out",
        ">Packets",
        ">Bytes",
    ])
    .split(4);
    let mut icmp = false;
    for f in top {
        let tos = u(f, "tos");
        // ICMP flows carry type and code where the ports would be.
        let (sport, dport) = match u(f, "proto") {
            1 | 58 => {
                icmp = true;
                (
                    "-".to_string(),
                    format!("{}/{}", u(f, "sport"), u(f, "dport")),
                )
            }
            _ => (u(f, "sport").to_string(), u(f, "dport").to_string()),
        };
        t.row(vec![
            s(f, "src"),
            sport,
            s(f, "dst"),
            dport,
            proto_name(u(f, "proto")),
            dscp_name(tos >> 2),
            s(f, "in"),
            s(f, "out"),
            u(f, "packets").to_string(),
            u(f, "bytes").to_string(),
        ]);
    }
    t.render(&mut o);
    if icmp {
        let _ = writeln!(o, "ICMP flows: Dport is the ICMP type/code.");
    }
    o
}

/// `show control-plane`: control-plane policing per punt class.
pub fn copp(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Control-plane policing: {}",
        if flag(v, "enabled") { "on" } else { "off" }
    );
    let _ = writeln!(o);
    let mut t = Table::new(&["Class", ">Rate (pps)", ">Burst", ">Passed", ">Dropped"]);
    let (mut passed, mut dropped) = (0, 0);
    for r in rows_at(v, "classes") {
        passed += u(r, "passed");
        dropped += u(r, "dropped");
        t.row(vec![
            s(r, "class"),
            opt_u(r, "rate").map_or("none".into(), |x| x.to_string()),
            s(r, "burst"),
            u(r, "passed").to_string(),
            u(r, "dropped").to_string(),
        ]);
    }
    t.total(vec![
        "Total".into(),
        String::new(),
        String::new(),
        passed.to_string(),
        dropped.to_string(),
    ]);
    t.render(&mut o);
    o
}

/// `show event manager`: policies with their runs and last result.
pub fn event_manager(v: &Value) -> String {
    let mut o = String::new();
    let ps = rows_at(v, "policies");
    let _ = writeln!(o, "{}", plural(ps.len() as u64, "policy", "policies"));
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Policy",
        "Event",
        "Actions",
        ">Runs",
        ">Suppressed",
        ">Failed",
        ">Last run",
        "Last result",
    ]);
    for p in ps {
        t.row(vec![
            format!(
                "{}{}",
                s(p, "name"),
                if flag(p, "enabled") { "" } else { " (off)" }
            ),
            s(p, "event"),
            strings(p, "actions").join(","),
            u(p, "runs").to_string(),
            u(p, "suppressed").to_string(),
            u(p, "failures").to_string(),
            opt_u(p, "last-run-s-ago").map_or("never".into(), |x| format!("{x} s ago")),
            text(p.get("last-result")),
        ]);
    }
    t.render(&mut o);
    let c = &v["cpu"];
    if c.is_object() {
        let f = |k: &str| opt_u(c, k).map_or("-".into(), |x| format!("{x}%"));
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "CPU (last sample, % of one core): lanyard {}, workers {}, control plane {}; host {} of {} cores",
            f("lanyard"),
            f("workers"),
            f("control-plane"),
            f("host"),
            u(c, "cores")
        );
        let busy: Vec<String> = rows_at(c, "threads")
            .iter()
            .filter(|t| u(t, "pct") > 0)
            .take(8)
            .map(|t| format!("{} {}%", s(t, "name"), u(t, "pct")))
            .collect();
        if !busy.is_empty() {
            let _ = writeln!(o, "Busiest threads: {}", busy.join(", "));
        }
    }
    o
}

/// `show event manager history`: recent runs, newest first, with each
/// action's result.
pub fn event_manager_history(v: &Value) -> String {
    let mut o = String::new();
    let h = rows_at(v, "history");
    let _ = writeln!(o, "{}", plural(h.len() as u64, "run", "runs"));
    for r in h {
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{} at {} (unix), action started {} us after detection",
            s(r, "policy"),
            u(r, "time"),
            u(r, "detect_to_action_us")
        );
        let _ = writeln!(o, "  event: {}", s(r, "trigger"));
        for a in rows_at(r, "results") {
            let first = a["output"]
                .as_str()
                .unwrap_or("")
                .lines()
                .next()
                .unwrap_or("")
                .to_string();
            let _ = writeln!(
                o,
                "  {:<4} {} ({} ms){}",
                if flag(a, "ok") { "ok" } else { "FAIL" },
                s(a, "action"),
                u(a, "ms"),
                if first.is_empty() {
                    String::new()
                } else {
                    format!(": {first}")
                }
            );
        }
    }
    o
}

/// `show monitor`: port mirroring sessions.
pub fn monitor(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}",
        plural(rows(v).len() as u64, "mirror session", "mirror sessions")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Session",
        "Destination",
        "Direction",
        ">Copies sent",
        ">Drops",
        "Sources",
    ]);
    for r in rows(v) {
        let mut src = strings(r, "sources");
        src.extend(
            rows_at(r, "vlans")
                .iter()
                .map(|x| format!("vlan {}", text(Some(x)))),
        );
        t.row(vec![
            s(r, "name"),
            s(r, "destination"),
            s(r, "direction"),
            u(r, "tx_frames").to_string(),
            u(r, "drops").to_string(),
            src.join(", "),
        ]);
    }
    t.render(&mut o);
    o
}

/// `show backup-pairs`.
pub fn backup_pairs(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}",
        plural(rows(v).len() as u64, "backup pair", "backup pairs")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Primary",
        "State",
        "Backup",
        "State",
        "Active",
        "Preempt",
        "Keepalive",
        ">Failovers",
        ">Last failover",
    ]);
    for r in rows(v) {
        let preempt = if flag(r, "preempt") {
            match opt_u(r, "preempt_delay_ms") {
                Some(d) if d > 0 => format!("after {d} ms"),
                _ => "yes".into(),
            }
        } else {
            "no".into()
        };
        t.row(vec![
            s(r, "primary"),
            s(r, "primary_state"),
            s(r, "backup"),
            s(r, "backup_state"),
            s(r, "active"),
            preempt,
            opt_u(r, "keepalive_ms").map_or("off".into(), |k| format!("{k} ms")),
            u(r, "failovers").to_string(),
            opt_u(r, "last_failover_ms_ago").map_or("never".into(), |ms| {
                if ms < 10_000 {
                    format!("{ms} ms ago")
                } else {
                    format!("{} ago", uptime(ms / 1000))
                }
            }),
        ]);
    }
    t.render(&mut o);
    o
}

/// LACP state flags as letters, one column each (EOS `show lacp`):
/// A activity, T short timeout, G aggregatable, S in sync, C collecting,
/// D distributing, F defaulted, E expired; `.` when clear.
fn lacp_flags(v: Option<&Value>) -> String {
    const FLAGS: [(&str, char); 8] = [
        ("activity", 'A'),
        ("timeout", 'T'),
        ("aggregation", 'G'),
        ("synchronization", 'S'),
        ("collecting", 'C'),
        ("distributing", 'D'),
        ("defaulted", 'F'),
        ("expired", 'E'),
    ];
    let set: Vec<String> = match v {
        Some(Value::Array(a)) => a.iter().map(|x| text(Some(x))).collect(),
        Some(Value::String(s)) => s.split_whitespace().map(String::from).collect(),
        Some(Value::Number(n)) => {
            let b = n.as_u64().unwrap_or(0);
            FLAGS
                .iter()
                .enumerate()
                .filter(|(i, _)| b & (1 << i) != 0)
                .map(|(_, f)| f.0.to_string())
                .collect()
        }
        _ => return "-".into(),
    };
    FLAGS
        .iter()
        .map(|(name, c)| {
            if set.iter().any(|x| x == name) {
                *c
            } else {
                '.'
            }
        })
        .collect()
}

/// `show port-channel`: each channel, its members' link and LACP state,
/// then each member's partner and LACPDU counters.
pub fn port_channels(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}",
        plural(rows(v).len() as u64, "port channel", "port channels")
    );
    let lacp_any = rows(v).iter().any(|r| s(r, "lacp") != "off");
    if lacp_any {
        let _ = writeln!(
            o,
            "LACP flags: A active, T short timeout, G aggregatable, S in sync, C collecting, \
D distributing, F defaulted, E expired"
        );
    }
    for r in rows(v) {
        let members = rows_at(r, "members");
        let dist = members.iter().filter(|m| flag(m, "distributing")).count();
        let _ = writeln!(o);
        let _ = writeln!(
            o,
            "{}: {}, {} of {} distributing (min-links {}), LACP {}, rate {}, load-balance {}",
            s(r, "name"),
            if flag(r, "up") { "up" } else { "down" },
            dist,
            plural(members.len() as u64, "member", "members"),
            u(r, "min_links"),
            s(r, "lacp"),
            s(r, "rate"),
            s(r, "load_balance")
        );
        let lacp = s(r, "lacp") != "off";
        if !lacp {
            let mut t = Table::new(&["Member", "Link", "Distributing"]).indent(2);
            for m in members {
                t.row(vec![
                    s(m, "port"),
                    s(m, "link"),
                    if flag(m, "distributing") { "yes" } else { "no" }.into(),
                ]);
            }
            t.render(&mut o);
            continue;
        }
        let mut t = Table::new(&[
            "Member",
            "Link",
            "Distributing",
            "LACP rx",
            "LACP mux",
            "Actor",
            "Partner",
        ])
        .indent(2);
        for m in members {
            t.row(vec![
                s(m, "port"),
                s(m, "link"),
                if flag(m, "distributing") { "yes" } else { "no" }.into(),
                s(m, "rx_state"),
                s(m, "mux_state"),
                lacp_flags(m.get("actor_state")),
                m.get("partner")
                    .filter(|p| p.is_object())
                    .map_or("-".into(), |p| lacp_flags(p.get("state"))),
            ]);
        }
        t.render(&mut o);
        let _ = writeln!(o);
        let mut t = Table::new(&[
            "Member",
            "Partner system",
            ">Key",
            ">Port",
            ">PDUs in",
            ">PDUs out",
            ">Bad PDUs",
            ">Timeouts",
        ])
        .indent(2);
        for m in members {
            let (sys, key, port) = match m.get("partner").filter(|p| p.is_object()) {
                Some(p) => (
                    format!("{},{}", u(p, "system_priority"), dotted(&s(p, "system"))),
                    u(p, "key").to_string(),
                    format!("{},{}", u(p, "port_priority"), u(p, "port")),
                ),
                None => ("none heard".into(), "-".into(), "-".into()),
            };
            t.row(vec![
                s(m, "port"),
                sys,
                key,
                port,
                u(m, "pdus_rx").to_string(),
                u(m, "pdus_tx").to_string(),
                u(m, "bad_rx").to_string(),
                u(m, "timeouts").to_string(),
            ]);
        }
        t.render(&mut o);
    }
    o
}

/// Snooping summary per VLAN (both snooping renderers start with it).
fn snooping_vlans(v: &Value, o: &mut String) {
    let vlans = rows_at(v, "vlans");
    let groups: u64 = vlans.iter().map(|r| u(r, "groups")).sum();
    let _ = writeln!(
        o,
        "{} in {}",
        plural(groups, "group", "groups"),
        plural(vlans.len() as u64, "VLAN", "VLANs")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "VLAN",
        ">Groups",
        "Querier",
        ">Queries sent",
        "Router ports",
    ]);
    for r in vlans {
        let routers = strings(r, "router-ports");
        t.row(vec![
            u(r, "vlan").to_string(),
            u(r, "groups").to_string(),
            r.get("querier")
                .and_then(Value::as_str)
                .unwrap_or("none heard")
                .to_string(),
            u(r, "queries-sent").to_string(),
            if routers.is_empty() {
                "none".to_string()
            } else {
                routers.join(", ")
            },
        ]);
    }
    t.render(o);
    let refused: Vec<String> = vlans
        .iter()
        .flat_map(|r| {
            nonzero(r.get("refused"))
                .into_iter()
                .map(move |(k, n)| format!("vlan {} {k} {n}", u(r, "vlan")))
        })
        .collect();
    if !refused.is_empty() {
        para(o, &format!("Refused: {}", refused.join(", ")), 9);
    }
    if let Some(m) = v.get("messages").filter(|m| m.is_object()) {
        let _ = writeln!(
            o,
            "Messages: {} IGMP, {} MLD, {} PIM hellos, {} malformed",
            u(m, "igmp"),
            u(m, "mld"),
            u(m, "pim-hellos"),
            u(m, "malformed")
        );
    }
}

/// `show ip igmp snooping [vlan N] count` (and MLD).
pub fn snooping_count(v: &Value) -> String {
    let mut o = String::new();
    snooping_vlans(v, &mut o);
    o
}

/// `show ip igmp snooping groups [vlan N]` (and MLD).
pub fn snooping_groups(v: &Value) -> String {
    let mut o = String::new();
    snooping_vlans(v, &mut o);
    let _ = writeln!(o);
    let mut t = Table::new(&["VLAN", "Group", "Port", "Mode", "Sources"]);
    for g in rows_at(v, "groups") {
        for p in rows_at(g, "ports") {
            let srcs = strings(p, "sources");
            t.row(vec![
                u(g, "vlan").to_string(),
                s(g, "group"),
                s(p, "port"),
                // The virtual-switch peer's: with its filter mode.
                match p.get("filter").and_then(Value::as_str) {
                    Some(f @ ("include" | "exclude")) => format!("{} {f}", s(p, "mode")),
                    _ => s(p, "mode"),
                },
                if srcs.is_empty() {
                    "any".to_string()
                } else {
                    srcs.join(", ")
                },
            ]);
        }
    }
    t.render(&mut o);
    o
}

/// `show ip mroute [summary]` (and IPv6).
pub fn mroutes(v: &Value) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{}: {} (S,G), {} (*,G); {} snooped, {} routed; {} KiB",
        plural(u(v, "count"), "route", "routes"),
        u(v, "s-g"),
        u(v, "star-g"),
        u(v, "snooped"),
        u(v, "routed"),
        u(v, "memory-bytes").div_ceil(1024)
    );
    if let Some(d) = v.get("data-path").filter(|d| d.is_object()) {
        let _ = writeln!(
            o,
            "Data path: {} replicated, {} with a route, {} without; drops: {} RPF failures, {} under TTL threshold",
            u(d, "replicated"),
            u(d, "registered"),
            u(d, "unregistered"),
            u(d, "rpf-fail"),
            u(d, "ttl-threshold")
        );
    }
    let Some(routes) = v.get("routes") else {
        return o;
    };
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "VLAN", "Source", "Group", "Origin", "In", ">Packets", ">Bytes", "Out",
    ])
    .split(4);
    for r in rows(routes) {
        t.row(vec![
            opt_u(r, "vlan").map_or("-".into(), |v| v.to_string()),
            s(r, "source"),
            s(r, "group"),
            s(r, "origin"),
            match s(r, "iif").as_str() {
                // Bidirectional: any port of the accept set.
                "bidir" => format!("{} (bidir)", strings(r, "accept").join(", ")),
                iif => iif.to_string(),
            },
            u(r, "packets").to_string(),
            u(r, "bytes").to_string(),
            strings(r, "oifs").join(", "),
        ]);
    }
    t.render(&mut o);
    o
}

/// `clear mac address-table [vlan N]`.
pub fn cleared(v: &Value) -> String {
    format!(
        "Cleared {}.\n",
        plural(u(v, "cleared"), "dynamic address", "dynamic addresses")
    )
}

/// "err-disabled (cause), recovery in N s", or "forwarding".
fn errdisable_state(e: &Value) -> String {
    if e.is_null() {
        return "forwarding".into();
    }
    match e.get("recovery-in-s").and_then(Value::as_u64) {
        Some(n) => format!("err-disabled ({}), recovery in {n} s", s(e, "cause")),
        None => format!("err-disabled ({}), until cleared", s(e, "cause")),
    }
}

/// `show storm-control`: one row per port and class with a limit.
pub fn storm_control(v: &Value) -> String {
    let mut o = String::new();
    if rows(v).is_empty() {
        o.push_str("No port has storm control.\n");
        return o;
    }
    let mut t = Table::new(&[
        "Port", "Class", ">Level", ">Dropped", "Storm", "Action", "State",
    ]);
    let mut dropped = 0;
    for r in rows(v) {
        let mut first = true;
        for class in ["broadcast", "multicast", "unknown-unicast"] {
            let c = &r[class];
            if c.get("level").is_none_or(Value::is_null) {
                continue;
            }
            dropped += u(c, "drops");
            t.row(vec![
                if first { s(r, "port") } else { String::new() },
                class.into(),
                s(c, "level"),
                u(c, "drops").to_string(),
                if flag(c, "storm") { "yes" } else { "no" }.into(),
                if first { s(r, "action") } else { String::new() },
                if first {
                    errdisable_state(&r["errdisabled"])
                } else {
                    String::new()
                },
            ]);
            first = false;
        }
    }
    t.total(vec![
        "Total".into(),
        String::new(),
        String::new(),
        dropped.to_string(),
        String::new(),
        String::new(),
        String::new(),
    ]);
    t.render(&mut o);
    o
}

/// `show loop-detect`.
pub fn loop_detect(v: &Value) -> String {
    if !flag(v, "enabled") {
        return "Loop detection is off (no loop-detect section in the configuration).\n".into();
    }
    let mut o = String::new();
    let _ = writeln!(
        o,
        "Loop detection: a probe every {} s per switched port and VLAN; on a loop: {}",
        u(v, "interval-s"),
        s(v, "action")
    );
    let _ = writeln!(
        o,
        "Recovery after {} s; {} sent",
        u(v, "recovery-s"),
        plural(u(v, "probes-sent"), "probe", "probes")
    );
    let _ = writeln!(o);
    let mut t = Table::new(&[
        "Port",
        "Probing",
        ">Returned",
        ">Loops",
        "Last loop",
        "State",
    ]);
    for r in rows_at(v, "ports") {
        let last = match r.get("last-loop").filter(|x| !x.is_null()) {
            Some(l) => format!(
                "from {} vlan {}, {} s ago",
                s(l, "sent-on"),
                u(l, "vlan"),
                u(l, "ago-s")
            ),
            None => "-".into(),
        };
        t.row(vec![
            s(r, "port"),
            if flag(r, "probing") { "yes" } else { "no" }.into(),
            u(r, "own-probes-received").to_string(),
            u(r, "loops").to_string(),
            last,
            errdisable_state(&r["errdisabled"]),
        ]);
    }
    t.render(&mut o);
    o
}

/// `clear errdisable [PORT]`.
pub fn errdisable_cleared(v: &Value) -> String {
    let ports = strings(v, "cleared");
    if ports.is_empty() {
        "No port was err-disabled.\n".into()
    } else {
        format!("Err-disable cleared on {}.\n", ports.join(", "))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn name_ranges_fold_consecutive_ports() {
        let n = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            name_ranges(&n(&[
                "sw1", "sw2", "sw3", "sw5", "eth0/1", "eth0/2", "mgmt", "sw6"
            ])),
            "sw1-3, sw5, eth0/1-2, mgmt, sw6"
        );
        assert_eq!(name_ranges(&[]), "");
        let many: Vec<String> = (1..=410).map(|i| format!("sw{i}")).collect();
        assert_eq!(name_ranges(&many), "sw1-410");
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn acl_compiled_line_shows_huge_pages_only_when_large() {
        let mut c = json!({"tables": 2, "buckets": 3, "largest-bucket": 2,
            "memory-bytes": 3000, "overflow-rules": 0, "unmatchable": 0, "shadowed": 0});
        assert_eq!(
            acl_compiled(&c),
            "2 hash tables, 3 buckets (largest 2), 3 KiB"
        );
        c["memory-bytes"] = json!(2_119_000);
        c["huge-bytes"] = json!(4 << 20);
        assert_eq!(
            acl_compiled(&c),
            "2 hash tables, 3 buckets (largest 2), 2070 KiB, 4096 KiB on 2 MB pages"
        );
        c["huge-bytes"] = Value::Null;
        assert!(acl_compiled(&c).ends_with(", 2 MB pages unknown"));
    }

    #[test]
    fn names_dscp_values() {
        assert_eq!(dscp_name(46), "ef");
        assert_eq!(dscp_name(34), "af41");
        assert_eq!(dscp_name(10), "af11");
        assert_eq!(dscp_name(38), "af43");
        assert_eq!(dscp_name(48), "cs6");
        assert_eq!(dscp_name(0), "default");
        assert_eq!(dscp_name(44), "voice-admit");
        assert_eq!(dscp_name(5), "5");
    }

    #[test]
    fn vrfs_show_refused_updates() {
        let v = serde_json::json!([
            {"name": "default", "table": 254, "routes_v4": 2, "routes_v6": 1, "refused": 0,
             "neighbors": 1, "interfaces": ["core"]},
            {"name": "V001", "table": 1001, "rd": "65000:1", "namespace": "V001",
             "routes_v4": 1201, "routes_v6": 1, "refused": 1200, "neighbors": 0,
             "interfaces": ["sw1.100"]},
        ]);
        let out = vrfs(&v);
        assert!(out.contains("Refused"), "{out}");
        assert!(
            out.lines()
                .any(|l| l.starts_with("V001") && l.contains(" 1200 ")),
            "{out}"
        );
        assert!(out.contains("could not take"), "{out}");
        let quiet = vrfs(&serde_json::json!([v[0].clone()]));
        assert!(!quiet.contains("could not take"), "{quiet}");
    }

    #[test]
    fn never_prints_json() {
        assert_eq!(text(Some(&json!({"a": 1}))), "?");
        assert_eq!(text(Some(&json!([1, "x", {"b": 2}]))), "1,x,?");
        assert_eq!(text(Some(&json!(null))), "-");
        assert_eq!(text(Some(&json!(true))), "yes");
    }

    #[test]
    fn uptime_reads_like_ios() {
        assert_eq!(uptime(5), "5 seconds");
        assert_eq!(uptime(61), "1 minute");
        assert_eq!(uptime(90_061), "1 day, 1 hour, 1 minute");
    }

    #[test]
    fn tables_wrap_lists_and_split_wide_rows() {
        let mut t = Table::new(&["Port", "Members"]);
        let many: Vec<String> = (0..60).map(|i| format!("port{i}")).collect();
        t.row(vec!["x".into(), many.join(", ")]);
        let mut o = String::new();
        t.render(&mut o);
        assert!(o.lines().all(|l| l.chars().count() <= MAX_WIDTH), "{o}");
        assert!(o.contains("port59") && o.lines().count() > 3, "{o}");

        let mut t = Table::new(&["A", "B", "C", "D"]).split(2);
        let wide = "x".repeat(55);
        t.row(vec![wide.clone(), wide.clone(), "c".repeat(10), "d".into()]);
        let mut o = String::new();
        t.render(&mut o);
        assert!(o.lines().all(|l| l.chars().count() <= MAX_WIDTH), "{o}");
        assert!(o.lines().any(|l| l.starts_with("    cccccccccc  d")), "{o}");
    }

    #[test]
    fn lacp_flags_from_names_or_bits() {
        assert_eq!(
            lacp_flags(Some(&json!(["activity", "aggregation", "synchronization"]))),
            "A.GS...."
        );
        assert_eq!(lacp_flags(Some(&json!(0x3d))), "A.GSCD..");
        assert_eq!(lacp_flags(None), "-");
    }
}

#[path = "show_mpls.rs"]
mod mpls;
pub use mpls::{mpls_fast_reroute, mpls_forwarding, mpls_pseudowires, mpls_table};

#[path = "show_stp.rs"]
mod stp;
pub use stp::spanning_tree;
#[path = "show_inline.rs"]
mod inline;
pub use inline::{
    service_control, service_control_applications, service_control_history, subscriber,
};
#[path = "show_vswitch.rs"]
mod vswitch;
pub use vswitch::virtual_switch;
#[path = "show_vrrp.rs"]
mod vrrp_show;
pub use vrrp_show::vrrp;
#[path = "show_cable.rs"]
mod cable;
pub use cable::cable_diagnostics;
