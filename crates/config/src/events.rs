//! `event-manager:` — policies "on this event, do these actions" that run
//! on the switch itself (docs/event-manager.md). Schema only; the checks
//! are in `checks::events`, the engine in the `events` crate.

use serde::{Deserialize, Serialize};

/// Default `event-manager.poll-interval-ms`.
pub const DEFAULT_POLL_MS: u32 = 1000;
/// Default `policies[].min-interval` (seconds between two runs).
pub const DEFAULT_MIN_INTERVAL: u32 = 10;
/// Default `script.timeout` (seconds).
pub const DEFAULT_SCRIPT_TIMEOUT: u32 = 10;

/// `event-manager:`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct EventManager {
    /// How often counters, CPU, flows and tables are sampled (100..60000).
    pub poll_interval_ms: u32,
    /// The SMTP relay mail actions use, `host:port`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub smtp_relay: Option<String>,
    /// The sender of mail actions.
    pub mail_from: String,
    /// The policies.
    pub policies: Vec<Policy>,
}

impl Default for EventManager {
    fn default() -> Self {
        EventManager {
            poll_interval_ms: DEFAULT_POLL_MS,
            smtp_relay: None,
            mail_from: "lanyard@localhost".into(),
            policies: Vec::new(),
        }
    }
}

/// One policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Policy {
    pub name: String,
    /// What triggers it (exactly one kind).
    pub on: Event,
    /// What it does, in order; a failing action is logged and the next runs.
    pub actions: Vec<Action>,
    /// Rate limit: at least this many seconds between two runs (a trigger
    /// meanwhile is counted as suppressed).
    #[serde(default = "default_min_interval")]
    pub min_interval: u32,
    /// Off: kept in the config, never runs.
    #[serde(default = "default_true")]
    pub enabled: bool,
}

fn default_min_interval() -> u32 {
    DEFAULT_MIN_INTERVAL
}

fn default_true() -> bool {
    true
}

/// The trigger: exactly one of `interface`, `counter`, `cpu`, `flows`,
/// `table`, `timer`, `cron`, `log`. `above`/`rearm-below` give the
/// threshold and its hysteresis (the policy fires when the value rises
/// above `above`, and can fire again only after it fell to `rearm-below`
/// or under; default `rearm-below` = `above`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Event {
    /// A port name, or `any`: link state changes (with `state`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interface: Option<String>,
    /// `up`, `down` or `change` (default `change`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// A counter `show` exposes: `interface PORT FIELD`, `interface PORT
    /// drops REASON`, `vlan N FIELD`, `acl NAME rule N`, `acl NAME
    /// implicit-deny`, `copp CLASS passed|dropped`, `l3 FIELD`, `l3 drops
    /// REASON`, `l3 punts REASON`, `class PORT in|out CLASS packets|bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counter: Option<String>,
    /// With `counter`: compare the rate per second, not the value.
    pub rate: bool,
    /// `lanyard` (all the switch's threads), `workers` (the data-path
    /// workers), `control-plane` (every other thread), `thread NAME` (the
    /// threads whose name starts with NAME): % of one core, like `top`;
    /// or `host` (all cores, % busy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
    /// Flows in the flow cache `per-interface` or `per-source`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flows: Option<String>,
    /// Table fill in percent: `mac`, `flow-cache`, `fib-ipv4`, `fib-ipv6`,
    /// `next-hops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// Every N seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timer: Option<u32>,
    /// A cron schedule, five fields (`*/5 * * * *`), UTC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    /// A regular expression on the switch's own log messages.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Threshold for counter, cpu, flows, table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub above: Option<u64>,
    /// Hysteresis: re-arm at or below this (default `above`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rearm_below: Option<u64>,
}

impl Event {
    /// The kinds set, by key name.
    pub fn kinds(&self) -> Vec<&'static str> {
        let mut k = Vec::new();
        let set = [
            ("interface", self.interface.is_some()),
            ("counter", self.counter.is_some()),
            ("cpu", self.cpu.is_some()),
            ("flows", self.flows.is_some()),
            ("table", self.table.is_some()),
            ("timer", self.timer.is_some()),
            ("cron", self.cron.is_some()),
            ("log", self.log.is_some()),
        ];
        for (n, on) in set {
            if on {
                k.push(n);
            }
        }
        k
    }
}

/// One action: exactly one key.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "kebab-case")]
pub struct Action {
    /// Write this line to the log (warning level). `{policy}`, `{event}`,
    /// `{value}`, `{interface}`, `{source}` are replaced.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<String>,
    /// Run a `show` command (the words after `show`); its output is
    /// attached to the run (and to later mail/webhook actions).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub show: Option<String>,
    /// Run a `clear` command (the words after `clear`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub clear: Option<String>,
    /// Mail through `event-manager.smtp-relay`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mail: Option<Mail>,
    /// POST the run as JSON to this `http://` URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// A syslog message (through `management.logging.syslog`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syslog: Option<SyslogAction>,
    /// Run a program.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<Script>,
    /// Merge a configuration patch into the running configuration and
    /// apply it atomically (as `config apply`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub apply: Option<Patch>,
}

impl Action {
    pub fn kinds(&self) -> Vec<&'static str> {
        let set = [
            ("log", self.log.is_some()),
            ("show", self.show.is_some()),
            ("clear", self.clear.is_some()),
            ("mail", self.mail.is_some()),
            ("webhook", self.webhook.is_some()),
            ("syslog", self.syslog.is_some()),
            ("script", self.script.is_some()),
            ("apply", self.apply.is_some()),
        ];
        set.iter().filter(|(_, on)| *on).map(|(n, _)| *n).collect()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Mail {
    pub to: String,
    #[serde(default)]
    pub subject: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct SyslogAction {
    pub message: String,
    /// `emergency`..`debug`; sent at the closest log level (default
    /// `warning`).
    #[serde(default)]
    pub severity: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Script {
    /// Absolute path of the program.
    pub path: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Killed after this many seconds.
    #[serde(default = "default_script_timeout")]
    pub timeout: u32,
}

fn default_script_timeout() -> u32 {
    DEFAULT_SCRIPT_TIMEOUT
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Patch {
    /// Configuration keys merged into the running configuration: maps
    /// merge key by key, list items with the same `name` (or `id`, or
    /// `class` for the classes of a policy map) merge,
    /// other list items are added. `{source}`, `{interface}` are replaced
    /// in strings.
    pub patch: serde_yaml_ng::Value,
    /// Undo the patch after this many seconds (if the configuration was
    /// not changed meanwhile).
    #[serde(default)]
    pub revert_after: Option<u32>,
}

/// Severity names of RFC 5424, most severe first.
pub const SEVERITIES: &[&str] = &[
    "emergency",
    "alert",
    "critical",
    "error",
    "warning",
    "notice",
    "informational",
    "debug",
];

/// Merge `patch` into `base` (see [`Patch::patch`]).
pub fn merge(base: &mut serde_yaml_ng::Value, patch: &serde_yaml_ng::Value) {
    use serde_yaml_ng::Value as Y;
    match (base, patch) {
        (Y::Mapping(b), Y::Mapping(p)) => {
            for (k, v) in p {
                match b.get_mut(k) {
                    Some(bv) => merge(bv, v),
                    None => {
                        b.insert(k.clone(), v.clone());
                    }
                }
            }
        }
        (Y::Sequence(b), Y::Sequence(p)) => {
            let key = |v: &Y| -> Option<Y> {
                let m = v.as_mapping()?;
                // `class`: the classes of a policy map, named by their
                // class map.
                m.get("name")
                    .or_else(|| m.get("id"))
                    .or_else(|| m.get("class"))
                    .cloned()
            };
            for item in p {
                match key(item).and_then(|k| b.iter_mut().find(|x| key(x).as_ref() == Some(&k))) {
                    Some(existing) => merge(existing, item),
                    None => {
                        if !b.contains(item) {
                            b.push(item.clone());
                        }
                    }
                }
            }
        }
        (b, p) => *b = p.clone(),
    }
}

/// Replace `{name}` in every string of `v`.
pub fn substitute(v: &serde_yaml_ng::Value, vars: &[(&str, &str)]) -> serde_yaml_ng::Value {
    use serde_yaml_ng::Value as Y;
    match v {
        Y::String(s) => Y::String(fill(s, vars)),
        Y::Sequence(x) => Y::Sequence(x.iter().map(|i| substitute(i, vars)).collect()),
        Y::Mapping(m) => Y::Mapping(
            m.iter()
                .map(|(k, v)| (k.clone(), substitute(v, vars)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Replace `{name}` in `s`.
pub fn fill(s: &str, vars: &[(&str, &str)]) -> String {
    let mut out = s.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{k}}}"), v);
    }
    out
}

/// A five-field cron schedule (minute hour day-of-month month
/// day-of-week), each field `*`, `N`, `A-B`, lists and `/step`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cron {
    fields: [u64; 5],
}

impl Cron {
    const RANGES: [(u32, u32); 5] = [(0, 59), (0, 23), (1, 31), (1, 12), (0, 7)];

    pub fn parse(s: &str) -> Result<Cron, String> {
        let parts: Vec<&str> = s.split_whitespace().collect();
        if parts.len() != 5 {
            return Err(format!(
                "{s:?}: a cron schedule has five fields (minute hour day month weekday)"
            ));
        }
        let mut fields = [0u64; 5];
        for (i, p) in parts.iter().enumerate() {
            let (lo, hi) = Cron::RANGES[i];
            for item in p.split(',') {
                let (range, step) = match item.split_once('/') {
                    Some((r, st)) => (
                        r,
                        st.parse::<u32>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| format!("{s:?}: bad step {st:?}"))?,
                    ),
                    None => (item, 1),
                };
                let (a, b) = if range == "*" {
                    (lo, hi)
                } else if let Some((a, b)) = range.split_once('-') {
                    (num(a, s)?, num(b, s)?)
                } else {
                    let n = num(range, s)?;
                    (n, if item.contains('/') { hi } else { n })
                };
                if a < lo || b > hi || a > b {
                    return Err(format!("{s:?}: {item:?} is outside {lo}..{hi}"));
                }
                let mut v = a;
                while v <= b {
                    fields[i] |= 1 << v;
                    v += step;
                }
            }
        }
        // Sunday is 0 or 7.
        if fields[4] & (1 << 7) != 0 {
            fields[4] |= 1;
        }
        Ok(Cron { fields })
    }

    /// Whether the schedule matches this minute (UTC, seconds since the
    /// epoch).
    pub fn matches(&self, unix: u64) -> bool {
        let min = (unix / 60) % 60;
        let hour = (unix / 3600) % 24;
        let days = unix / 86400;
        let weekday = (days + 4) % 7; // 1970-01-01 was a Thursday.
        let (_, month, day) = civil(days as i64);
        let f = &self.fields;
        f[0] & (1 << min) != 0
            && f[1] & (1 << hour) != 0
            && f[2] & (1 << day) != 0
            && f[3] & (1 << month) != 0
            && f[4] & (1 << weekday) != 0
    }
}

fn num(a: &str, s: &str) -> Result<u32, String> {
    a.parse()
        .map_err(|_| format!("{s:?}: {a:?} is not a number"))
}

/// (year, month 1..12, day 1..31) of days since 1970-01-01 (H. Hinnant's
/// civil-from-days).
fn civil(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (m <= 2) as i64, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cron_parses_and_matches() {
        let c = Cron::parse("*/15 2 * * 1-5").unwrap();
        // 2026-11-25 (a Wednesday) 02:30 UTC.
        let t = 1_795_573_800;
        assert_eq!(civil(t as i64 / 86400), (2026, 11, 25));
        assert!(c.matches(t));
        assert!(!c.matches(t + 60));
        assert!(!c.matches(t + 3600));
        for bad in [
            "* * * *",
            "61 * * * *",
            "*/0 * * * *",
            "a * * * *",
            "5-1 * * * *",
        ] {
            assert!(Cron::parse(bad).is_err(), "{bad}");
        }
        // 2026-11-29 00:00 UTC is a Sunday: weekday 7 and 0 both match.
        assert!(Cron::parse("0 0 * * 7").unwrap().matches(1_795_910_400));
        assert!(Cron::parse("0 0 * * 0").unwrap().matches(1_795_910_400));
        assert!(!Cron::parse("0 0 * * 1").unwrap().matches(1_795_910_400));
    }

    #[test]
    fn merge_by_name_and_append() {
        let mut b: serde_yaml_ng::Value =
            serde_yaml_ng::from_str("ports:\n  - name: a\n    vlan: 1\n  - name: b\nx: [1]\n")
                .unwrap();
        let p: serde_yaml_ng::Value =
            serde_yaml_ng::from_str("ports:\n  - name: b\n    vlan: 2\n  - name: c\nx: [1, 2]\n")
                .unwrap();
        merge(&mut b, &p);
        let want: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "ports:\n  - name: a\n    vlan: 1\n  - name: b\n    vlan: 2\n  - name: c\nx: [1, 2]\n",
        )
        .unwrap();
        assert_eq!(b, want);
    }

    /// A patch applied twice (the same source caught again) changes
    /// nothing the second time: policy-map classes merge by class name,
    /// identical list items are not repeated.
    #[test]
    fn merge_is_idempotent_for_policy_classes() {
        let mut b: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "policy-maps:\n  - name: q\n    classes:\n      - class: s\n        police: {cir: 64k, exceed: drop}\n",
        )
        .unwrap();
        let p: serde_yaml_ng::Value = serde_yaml_ng::from_str(
            "class-maps:\n  - name: s\n    match: [{source: 192.0.2.1/32}]\npolicy-maps:\n  - name: q\n    classes:\n      - {class: s, police: {cir: 64k}}\n",
        )
        .unwrap();
        merge(&mut b, &p);
        let once = b.clone();
        merge(&mut b, &p);
        assert_eq!(b, once);
        let classes = &b["policy-maps"][0]["classes"];
        assert_eq!(
            classes.as_sequence().map(|c| c.len()),
            Some(1),
            "{classes:?}"
        );
        assert_eq!(
            b["class-maps"][0]["match"].as_sequence().map(|c| c.len()),
            Some(1)
        );
    }
}

/// A counter named in `on.counter`, resolved against the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CounterRef {
    /// `show interfaces counters`: a port's field, or `drops.REASON`.
    Port { port: String, field: String },
    /// The per-VLAN counters.
    Vlan { vlan: u16, field: String },
    /// An access-list rule's hits (`rule: None`: the implicit deny).
    Acl { name: String, rule: Option<u64> },
    /// `show control-plane`: `passed` or `dropped` of a class.
    Copp { class: String, field: String },
    /// The layer-3 counters: a field, `drops.REASON` or `punts.REASON`.
    L3 { field: String },
    /// `show policy-map interface`: a class's `packets` or `bytes`.
    Class {
        port: String,
        direction: String,
        class: String,
        field: String,
    },
}
