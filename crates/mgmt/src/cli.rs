//! Operator command words (`show mac address-table vlan 10 count`) turned
//! into API requests and renderers.
//!
//! Commands are data: [`SHOW`] and [`CLEAR`] hold one row per command with
//! its usage, one line of help, its arguments, the API request and the
//! renderer (`crate::show`). Help text, parsing, the golden-output tests and
//! the acceptance test that runs every command all read these tables, so a
//! command cannot exist without help or a test.

use crate::show;
use serde_json::{json, Map, Value};

/// Renders an API answer as text (pure; see `crate::show`).
pub type Render = fn(&Value) -> String;

/// One `show` (or `clear`) command.
pub struct CommandDef {
    /// The words that name it, canonical spelling.
    pub words: &'static str,
    /// Other spellings (IOS / EOS habits), same arguments.
    pub aliases: &'static [&'static str],
    /// What may follow the words, for help (`[vlan N] [count]`).
    pub usage: &'static str,
    /// One line of help.
    pub help: &'static str,
    /// Arguments, accepted in any order.
    pub args: &'static [Arg],
    /// The management API request (a JSON object); arguments add keys.
    pub request: &'static str,
    pub render: Render,
}

/// One argument of a command.
pub enum Arg {
    /// `WORD VALUE`: the request gets `key: VALUE`.
    Keyword {
        word: &'static str,
        key: &'static str,
        value: ValueKind,
    },
    /// `WORD`: merges `set` (a JSON object) into the request and, if
    /// given, renders with `render` instead of the command's renderer.
    Flag {
        word: &'static str,
        set: &'static str,
        render: Option<Render>,
    },
    /// Any other word (at most one): the request gets `key: WORD`.
    Positional { key: &'static str, value: ValueKind },
}

/// What an argument's value must be.
#[derive(Clone, Copy)]
pub enum ValueKind {
    /// 1..4094.
    Vlan,
    /// A name (port, list, ...), passed as it is.
    Name,
    /// An address or a prefix (`10.0.0.0/8`, `2001:db8::1`).
    Prefix,
    /// A MAC address, `aa:bb:cc:dd:ee:ff` or `aabb.ccdd.eeff`.
    Mac,
    /// A number in the range.
    Count(u64, u64),
}

impl ValueKind {
    fn parse(self, w: &str) -> Result<Value, String> {
        match self {
            ValueKind::Vlan => w
                .parse::<u16>()
                .ok()
                .filter(|v| (1..=4094).contains(v))
                .map(|v| json!(v))
                .ok_or_else(|| format!("bad VLAN id {w:?}: expected 1..4094")),
            ValueKind::Name => Ok(json!(w)),
            ValueKind::Prefix => {
                let ok = match w.split_once('/') {
                    Some((a, l)) => {
                        a.parse::<std::net::IpAddr>().is_ok() && l.parse::<u8>().is_ok()
                    }
                    None => w.parse::<std::net::IpAddr>().is_ok(),
                };
                if ok {
                    Ok(json!(w))
                } else {
                    Err(format!("{w:?} is not an address or prefix"))
                }
            }
            ValueKind::Mac => parse_mac(w)
                .map(|m| json!(m))
                .ok_or_else(|| format!("{w:?} is not a MAC address (aa:bb:cc:dd:ee:ff)")),
            ValueKind::Count(lo, hi) => w
                .parse::<u64>()
                .ok()
                .filter(|n| (lo..=hi).contains(n))
                .map(|n| json!(n))
                .ok_or_else(|| format!("{w:?}: expected a number {lo}..{hi}")),
        }
    }
}

/// `aa:bb:cc:dd:ee:ff` from either MAC spelling (also `-` separators).
fn parse_mac(w: &str) -> Option<String> {
    let hex: String = w
        .chars()
        .filter(|c| !matches!(c, ':' | '.' | '-'))
        .collect::<String>()
        .to_ascii_lowercase();
    if hex.len() != 12 || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let pairs: Vec<&str> = (0..6).map(|i| &hex[2 * i..2 * i + 2]).collect();
    Some(pairs.join(":"))
}

const VLAN: Arg = Arg::Keyword {
    word: "vlan",
    key: "vlan",
    value: ValueKind::Vlan,
};

/// Every `show` command.
pub const SHOW: &[CommandDef] = &[
    CommandDef {
        words: "version",
        aliases: &[],
        usage: "",
        help: "software version, switch name, uptime, ports and workers",
        args: &[],
        request: r#"{"cmd":"show-version"}"#,
        render: show::version,
    },
    CommandDef {
        words: "interfaces",
        aliases: &["interfaces status", "interfaces brief", "interface"],
        usage: "[PORT | RANGE] [up | down] [vlan N] [summary]",
        help: "ports: link state, mode, VLAN, MTU, frames, drops; RANGE: sw1-48,sw60",
        args: &[
            Arg::Positional {
                key: "port",
                value: ValueKind::Name,
            },
            Arg::Flag {
                word: "up",
                set: r#"{"state":"up"}"#,
                render: None,
            },
            Arg::Flag {
                word: "down",
                set: r#"{"state":"down"}"#,
                render: None,
            },
            VLAN,
            Arg::Flag {
                word: "summary",
                set: "{}",
                render: Some(show::interfaces_summary),
            },
        ],
        request: r#"{"cmd":"show-interfaces"}"#,
        render: show::interfaces,
    },
    CommandDef {
        words: "interfaces counters",
        aliases: &["interface counters"],
        usage: "",
        help: "octets, unicast/multicast/broadcast frames in and out per port",
        args: &[],
        request: r#"{"cmd":"show-counters"}"#,
        render: show::interfaces_counters,
    },
    CommandDef {
        words: "interfaces counters errors",
        aliases: &["interfaces counters drops", "interface counters errors"],
        usage: "",
        help: "frames dropped per port, by reason",
        args: &[],
        request: r#"{"cmd":"show-counters"}"#,
        render: show::interfaces_errors,
    },
    CommandDef {
        words: "interfaces trunk",
        aliases: &["interface trunk"],
        usage: "",
        help: "trunk and 802.1ad tunnel ports: native VLAN, TPID, VLANs",
        args: &[],
        request: r#"{"cmd":"show-interfaces"}"#,
        render: show::interfaces_trunk,
    },
    CommandDef {
        words: "vlan",
        aliases: &["vlans", "vlan brief"],
        usage: "[id N]",
        help: "VLANs: name, learning, MAC limit and count, member ports",
        args: &[Arg::Keyword {
            word: "id",
            key: "vlan",
            value: ValueKind::Vlan,
        }],
        request: r#"{"cmd":"show-vlans"}"#,
        render: show::vlans,
    },
    CommandDef {
        words: "mac address-table",
        aliases: &["mac-address-table"],
        usage: "[vlan N] [interface PORT] [address MAC] [dynamic | static] [count]",
        help: "learned and static MAC addresses; count: totals per VLAN, learning",
        args: &[
            VLAN,
            Arg::Keyword {
                word: "interface",
                key: "port",
                value: ValueKind::Name,
            },
            Arg::Keyword {
                word: "address",
                key: "mac",
                value: ValueKind::Mac,
            },
            Arg::Flag {
                word: "dynamic",
                set: r#"{"type":"dynamic"}"#,
                render: None,
            },
            Arg::Flag {
                word: "static",
                set: r#"{"type":"static"}"#,
                render: None,
            },
            Arg::Flag {
                word: "count",
                set: r#"{"cmd":"show-mac-count"}"#,
                render: Some(show::mac_count),
            },
        ],
        request: r#"{"cmd":"show-mac"}"#,
        render: show::mac_table,
    },
    CommandDef {
        words: "counters",
        aliases: &[],
        usage: "",
        help: "every counter: ports, VLANs, drops by reason, routing",
        args: &[],
        request: r#"{"cmd":"show-counters"}"#,
        render: show::counters,
    },
    CommandDef {
        words: "ip interface",
        aliases: &["ip interfaces", "ip interface brief", "ipv6 interface"],
        usage: "",
        help: "routed ports and VLAN interfaces: TAP, MAC, MTU, uRPF, addresses",
        args: &[],
        request: r#"{"cmd":"show-ip-interfaces"}"#,
        render: show::ip_interfaces,
    },
    CommandDef {
        words: "ip route",
        aliases: &[],
        usage: "[vrf NAME] [summary | PREFIX | ADDRESS]",
        help: "IPv4 routes (ADDRESS: longest match); summary: sources, FIB, FPM",
        args: &[
            Arg::Flag {
                word: "summary",
                set: r#"{"summary":true}"#,
                render: Some(show::route_summary),
            },
            Arg::Keyword {
                word: "vrf",
                key: "vrf",
                value: ValueKind::Name,
            },
            Arg::Positional {
                key: "prefix",
                value: ValueKind::Prefix,
            },
        ],
        request: r#"{"cmd":"show-ip-route","family":4}"#,
        render: show::routes,
    },
    CommandDef {
        words: "ipv6 route",
        aliases: &[],
        usage: "[vrf NAME] [summary | PREFIX | ADDRESS]",
        help: "IPv6 routes, as ip route",
        args: &[
            Arg::Flag {
                word: "summary",
                set: r#"{"summary":true}"#,
                render: Some(show::route_summary),
            },
            Arg::Keyword {
                word: "vrf",
                key: "vrf",
                value: ValueKind::Name,
            },
            Arg::Positional {
                key: "prefix",
                value: ValueKind::Prefix,
            },
        ],
        request: r#"{"cmd":"show-ip-route","family":6}"#,
        render: show::routes,
    },
    CommandDef {
        words: "vrf",
        aliases: &["vrfs", "vrf brief"],
        usage: "",
        help: "VRFs: table id, route distinguisher, namespace, interfaces, routes",
        args: &[],
        request: r#"{"cmd":"show-vrf"}"#,
        render: show::vrfs,
    },
    CommandDef {
        words: "mpls table",
        aliases: &["mpls forwarding-table"],
        usage: "",
        help: "label entries: in-label, action, out-labels, next hop, counters",
        args: &[],
        request: r#"{"cmd":"show-mpls-table"}"#,
        render: show::mpls_table,
    },
    CommandDef {
        words: "mpls forwarding",
        aliases: &[],
        usage: "",
        help: "label plane: entries, labelled routes (FTN), data-path counters",
        args: &[],
        request: r#"{"cmd":"show-mpls-forwarding"}"#,
        render: show::mpls_forwarding,
    },
    CommandDef {
        words: "mpls pseudowires",
        aliases: &["l2vpn", "l2vpn atom vc", "mpls l2transport vc"],
        usage: "",
        help: "pseudowires: circuit, neighbour, pw-id, labels, state, counters",
        args: &[],
        request: r#"{"cmd":"show-mpls-pseudowires"}"#,
        render: show::mpls_pseudowires,
    },
    CommandDef {
        words: "mpls fast-reroute",
        aliases: &["mpls traffic-eng fast-reroute database"],
        usage: "",
        help: "fast reroute: protected ports, bypasses, active path, switches",
        args: &[],
        request: r#"{"cmd":"show-mpls-fast-reroute"}"#,
        render: show::mpls_fast_reroute,
    },
    CommandDef {
        words: "arp",
        aliases: &["ip arp"],
        usage: "",
        help: "IPv4 neighbours (resolved by the kernel on the TAPs, mirrored)",
        args: &[],
        request: r#"{"cmd":"show-arp"}"#,
        render: show::neighbors,
    },
    CommandDef {
        words: "ipv6 neighbors",
        aliases: &["ipv6 neighbours", "ipv6 neighbor"],
        usage: "",
        help: "IPv6 neighbours",
        args: &[],
        request: r#"{"cmd":"show-ipv6-neighbors"}"#,
        render: show::neighbors,
    },
    CommandDef {
        words: "access-lists",
        aliases: &[
            "access-list",
            "ip access-lists",
            "ipv6 access-lists",
            "mac access-lists",
        ],
        usage: "[NAME] [all]",
        help: "access lists: where attached, rules with matches; all: every rule",
        args: &[
            Arg::Flag {
                word: "all",
                set: r#"{"all":true}"#,
                render: None,
            },
            Arg::Positional {
                key: "name",
                value: ValueKind::Name,
            },
        ],
        request: r#"{"cmd":"show-access-lists","all":false}"#,
        render: show::access_lists,
    },
    CommandDef {
        words: "access-lists interface",
        aliases: &["access-list interface", "ip access-lists interface"],
        usage: "PORT [all]",
        help: "access lists on PORT, with the matches counted on PORT",
        args: &[
            Arg::Flag {
                word: "all",
                set: r#"{"all":true}"#,
                render: None,
            },
            Arg::Positional {
                key: "interface",
                value: ValueKind::Name,
            },
        ],
        request: r#"{"cmd":"show-access-lists-attached","all":false}"#,
        render: show::access_lists_attached,
    },
    CommandDef {
        words: "access-lists vlan",
        aliases: &["access-list vlan", "ip access-lists vlan"],
        usage: "N [all]",
        help: "access lists on VLAN N, with the matches counted there",
        args: &[
            Arg::Flag {
                word: "all",
                set: r#"{"all":true}"#,
                render: None,
            },
            Arg::Positional {
                key: "vlan",
                value: ValueKind::Vlan,
            },
        ],
        request: r#"{"cmd":"show-access-lists-attached","all":false}"#,
        render: show::access_lists_attached,
    },
    CommandDef {
        words: "policy-map interface",
        aliases: &["policy-map interfaces", "service-policy interface"],
        usage: "[PORT]",
        help: "QoS policies per port: classes, re-marking, policers, queues",
        args: &[Arg::Positional {
            key: "port",
            value: ValueKind::Name,
        }],
        request: r#"{"cmd":"show-policy-map-interface"}"#,
        render: show::policy_maps,
    },
    CommandDef {
        words: "flow cache",
        aliases: &["flow monitor cache", "ip flow cache"],
        usage: "[top N]",
        help: "flow accounting: export, cache use, the largest flows (top 20)",
        args: &[Arg::Keyword {
            word: "top",
            key: "top",
            value: ValueKind::Count(1, 10_000),
        }],
        request: r#"{"cmd":"show-flow-cache","top":20}"#,
        render: show::flow_cache,
    },
    CommandDef {
        words: "monitor",
        aliases: &["monitor session", "monitor sessions"],
        usage: "",
        help: "port mirroring sessions: sources, destination, copies",
        args: &[],
        request: r#"{"cmd":"show-monitor"}"#,
        render: show::monitor,
    },
    CommandDef {
        words: "event manager",
        aliases: &["event-manager", "event-handler"],
        usage: "[history]",
        help: "event-manager policies and their runs; history: recent runs, results",
        args: &[Arg::Flag {
            word: "history",
            set: "{}",
            render: Some(show::event_manager_history),
        }],
        request: r#"{"cmd":"show-event-manager"}"#,
        render: show::event_manager,
    },
    CommandDef {
        words: "control-plane",
        aliases: &["policy-map control-plane", "copp"],
        usage: "",
        help: "control-plane policing: rate, passed and dropped per punt class",
        args: &[],
        request: r#"{"cmd":"show-copp"}"#,
        render: show::copp,
    },
    CommandDef {
        words: "service-control",
        aliases: &["service control", "dpi"],
        usage: "[applications | history]",
        help: "inline service control: flows, usage, controllers, history",
        args: &[
            Arg::Flag {
                word: "applications",
                set: r#"{"applications":true}"#,
                render: Some(show::service_control_applications),
            },
            Arg::Flag {
                word: "history",
                set: r#"{"history":true}"#,
                render: Some(show::service_control_history),
            },
        ],
        request: r#"{"cmd":"show-service-control"}"#,
        render: show::service_control,
    },
    CommandDef {
        words: "subscriber",
        aliases: &[],
        usage: "NAME",
        help: "a service-control subscriber: package, addresses, quota, usage",
        args: &[Arg::Positional {
            key: "id",
            value: ValueKind::Name,
        }],
        request: r#"{"cmd":"show-subscriber"}"#,
        render: show::subscriber,
    },
    CommandDef {
        words: "storm-control",
        aliases: &["storm-control interface", "storm"],
        usage: "",
        help: "storm control: limits, drops and storms per port and class",
        args: &[],
        request: r#"{"cmd":"show-storm-control"}"#,
        render: show::storm_control,
    },
    CommandDef {
        words: "loop-detect",
        aliases: &["loop-detection", "loop-protection"],
        usage: "",
        help: "loop detection: probes returned, loops found, err-disabled ports",
        args: &[],
        request: r#"{"cmd":"show-loop-detect"}"#,
        render: show::loop_detect,
    },
    CommandDef {
        words: "spanning-tree",
        aliases: &[
            "spanning-tree detail",
            "spanning-tree summary",
            "stp",
            "rstp",
        ],
        usage: "",
        help: "spanning tree: root, this bridge, port roles and states, BPDUs",
        args: &[],
        request: r#"{"cmd":"show-spanning-tree"}"#,
        render: show::spanning_tree,
    },
    CommandDef {
        words: "virtual-switch",
        aliases: &["vpc", "mlag", "mclag"],
        usage: "",
        help: "virtual-switch pair: roles, peer link, keepalive, channels",
        args: &[],
        request: r#"{"cmd":"show-virtual-switch"}"#,
        render: show::virtual_switch,
    },
    CommandDef {
        words: "vrrp",
        aliases: &["vrrp brief", "vrrp detail"],
        usage: "",
        help: "VRRP groups: state, priority, virtual IP, master, timers, counters",
        args: &[],
        request: r#"{"cmd":"show-vrrp"}"#,
        render: show::vrrp,
    },
    CommandDef {
        words: "backup-pairs",
        aliases: &["backup-pair", "interfaces switchport backup"],
        usage: "",
        help: "backup port pairs: member states, active port, failovers",
        args: &[],
        request: r#"{"cmd":"show-backup-pairs"}"#,
        render: show::backup_pairs,
    },
    CommandDef {
        words: "port-channel",
        aliases: &[
            "port-channels",
            "port-channel summary",
            "etherchannel",
            "etherchannel summary",
            "lacp",
            "lacp neighbor",
            "lacp counters",
        ],
        usage: "",
        help: "port channels: members, LACP states, partners and LACPDU counters",
        args: &[],
        request: r#"{"cmd":"show-port-channel"}"#,
        render: show::port_channels,
    },
    CommandDef {
        words: "ip igmp snooping",
        aliases: &[],
        usage: "[groups] [vlan N] [count]",
        help: "IGMP snooping: queriers and router ports per VLAN, groups per port",
        args: &[
            Arg::Flag {
                word: "groups",
                set: "{}",
                render: None,
            },
            VLAN,
            Arg::Flag {
                word: "count",
                set: r#"{"count":true}"#,
                render: Some(show::snooping_count),
            },
        ],
        request: r#"{"cmd":"show-igmp-snooping","family":4,"count":false}"#,
        render: show::snooping_groups,
    },
    CommandDef {
        words: "ipv6 mld snooping",
        aliases: &[],
        usage: "[groups] [vlan N] [count]",
        help: "MLD snooping, as ip igmp snooping",
        args: &[
            Arg::Flag {
                word: "groups",
                set: "{}",
                render: None,
            },
            VLAN,
            Arg::Flag {
                word: "count",
                set: r#"{"count":true}"#,
                render: Some(show::snooping_count),
            },
        ],
        request: r#"{"cmd":"show-igmp-snooping","family":6,"count":false}"#,
        render: show::snooping_groups,
    },
    CommandDef {
        words: "ip mroute",
        aliases: &[],
        usage: "[summary]",
        help: "IPv4 multicast routes (snooped and routed) with counters",
        args: &[Arg::Flag {
            word: "summary",
            set: r#"{"summary":true}"#,
            render: None,
        }],
        request: r#"{"cmd":"show-mroute","family":4,"summary":false}"#,
        render: show::mroutes,
    },
    CommandDef {
        words: "ipv6 mroute",
        aliases: &[],
        usage: "[summary]",
        help: "IPv6 multicast routes",
        args: &[Arg::Flag {
            word: "summary",
            set: r#"{"summary":true}"#,
            render: None,
        }],
        request: r#"{"cmd":"show-mroute","family":6,"summary":false}"#,
        render: show::mroutes,
    },
];

/// Every `clear` command.
pub const CLEAR: &[CommandDef] = &[
    CommandDef {
        words: "mac address-table",
        aliases: &["mac-address-table", "mac address-table dynamic"],
        usage: "[vlan N]",
        help: "forget learned (dynamic) addresses, of one VLAN or all",
        args: &[VLAN],
        request: r#"{"cmd":"clear-mac"}"#,
        render: show::cleared,
    },
    CommandDef {
        words: "errdisable",
        aliases: &["errdisable interface", "err-disable"],
        usage: "[PORT]",
        help: "bring err-disabled ports (storm control, loops) back",
        args: &[Arg::Positional {
            key: "port",
            value: ValueKind::Name,
        }],
        request: r#"{"cmd":"clear-errdisable"}"#,
        render: show::errdisable_cleared,
    },
];

/// A parsed `show` or `clear` command.
pub struct Command {
    pub request: Value,
    pub render: Render,
    /// The renderer's name (see [`CommandDef::renderers`]; golden files).
    pub view: String,
}

impl CommandDef {
    /// Every spelling of the words, canonical first.
    fn spellings(&self) -> impl Iterator<Item = &'static str> {
        std::iter::once(self.words).chain(self.aliases.iter().copied())
    }

    /// `show mac address-table [vlan N] ...`.
    pub fn synopsis(&self, verb: &str) -> String {
        if self.usage.is_empty() {
            format!("{verb} {}", self.words)
        } else {
            format!("{verb} {} {}", self.words, self.usage)
        }
    }

    /// The name of its output (golden files): the words with `-` for
    /// spaces, `clear-` in front for `clear` commands.
    fn view(&self, verb: &str) -> String {
        let w = self.words.replace(' ', "-");
        if verb == "show" {
            w
        } else {
            format!("{verb}-{w}")
        }
    }

    /// The renderers this command can use: its own, and its flags'
    /// (named `view[-flag]`, as the golden files are).
    pub fn renderers(&self, verb: &str) -> Vec<(String, Render)> {
        let base = self.view(verb);
        let mut v = vec![(base.clone(), self.render)];
        for a in self.args {
            if let Arg::Flag {
                word,
                render: Some(r),
                ..
            } = a
            {
                v.push((format!("{base}-{word}"), *r));
            }
        }
        v
    }

    /// Build the request from the words after the command's own.
    fn build(&self, verb: &str, rest: &[&str]) -> Result<Command, String> {
        let usage = || format!("usage: {}", self.synopsis(verb));
        let mut req: Map<String, Value> = match serde_json::from_str(self.request) {
            Ok(Value::Object(m)) => m,
            _ => return Err(format!("internal: bad request template {}", self.request)),
        };
        let mut render = self.render;
        let mut view = self.view(verb);
        let mut positional_done = false;
        let mut i = 0;
        while i < rest.len() {
            let w = rest[i];
            let mut used = false;
            for a in self.args {
                match a {
                    Arg::Keyword { word, key, value } if *word == w => {
                        let v = rest
                            .get(i + 1)
                            .ok_or_else(|| format!("{w:?} needs a value; {}", usage()))?;
                        req.insert((*key).into(), value.parse(v)?);
                        i += 1;
                        used = true;
                    }
                    Arg::Flag {
                        word,
                        set,
                        render: r,
                    } if *word == w => {
                        if let Ok(Value::Object(m)) = serde_json::from_str::<Value>(set) {
                            req.extend(m);
                        }
                        if let Some(r) = r {
                            render = *r;
                            view = format!("{}-{word}", self.view(verb));
                        }
                        used = true;
                    }
                    _ => {}
                }
                if used {
                    break;
                }
            }
            if !used {
                let pos = self.args.iter().find_map(|a| match a {
                    Arg::Positional { key, value } => Some((key, value)),
                    _ => None,
                });
                match pos {
                    Some((key, value)) if !positional_done => {
                        req.insert((*key).into(), value.parse(w)?);
                        positional_done = true;
                    }
                    _ => return Err(format!("unexpected {w:?}; {}", usage())),
                }
            }
            i += 1;
        }
        Ok(Command {
            request: Value::Object(req),
            render,
            view,
        })
    }
}

/// Whether `typed` names command word `word`: equal, or an abbreviation
/// of at least two letters (`int` for `interfaces`, as on IOS).
fn abbreviates(typed: &str, word: &str) -> bool {
    typed == word || (typed.len() >= 2 && word.starts_with(typed))
}

/// The command `words` names in `table`, and the words left for its
/// arguments. The longest spelling wins; exact words beat abbreviations.
fn find<'a, 'w>(
    table: &'a [CommandDef],
    verb: &str,
    words: &'w [&'w str],
) -> Result<(&'a CommandDef, &'w [&'w str]), String> {
    let mut best: Option<(&CommandDef, usize, usize, &str)> = None;
    let mut tie = None;
    for c in table {
        for sp in c.spellings() {
            let cw: Vec<&str> = sp.split(' ').collect();
            if cw.len() > words.len() || !cw.iter().zip(words).all(|(c, t)| abbreviates(t, c)) {
                continue;
            }
            let exact = cw.iter().zip(words).filter(|(c, t)| c == t).count();
            let better = match best {
                None => true,
                Some((_, n, e, _)) => cw.len() > n || (cw.len() == n && exact > e),
            };
            let same =
                best.is_some_and(|(b, n, e, _)| cw.len() == n && exact == e && !std::ptr::eq(b, c));
            if better {
                best = Some((c, cw.len(), exact, sp));
                tie = None;
            } else if same {
                tie = Some(sp);
            }
        }
    }
    match (best, tie) {
        (Some((_, _, _, a)), Some(b)) => Err(format!(
            "ambiguous command \"{verb} {}\": {a:?} or {b:?}",
            words.join(" ")
        )),
        (Some((c, n, _, _)), None) => Ok((c, &words[n..])),
        (None, _) => {
            let near: Vec<String> = table
                .iter()
                .filter(|c| words.first().is_some_and(|w| c.words.starts_with(w)))
                .map(|c| c.synopsis(verb))
                .collect();
            Err(format!(
                "unknown command \"{verb} {}\"; {}",
                words.join(" "),
                if near.is_empty() {
                    format!("`lanyard {verb} --help` lists them")
                } else {
                    format!("did you mean: {}", near.join("; "))
                }
            ))
        }
    }
}

fn parse(table: &[CommandDef], verb: &str, words: &[String]) -> Result<Command, String> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let (c, rest) = find(table, verb, &w)?;
    c.build(verb, rest)
}

/// Parse the words after `show`.
pub fn parse_show(words: &[String]) -> Result<Command, String> {
    parse(SHOW, "show", words)
}

/// Parse the words after `clear`.
pub fn parse_clear(words: &[String]) -> Result<Command, String> {
    parse(CLEAR, "clear", words)
}

/// Where the help column of `help` starts (after two spaces of indent).
pub const HELP_COLUMN: usize = 48;

/// Help for a table: one line per command, synopsis then help at
/// [`HELP_COLUMN`] (on the next line when the synopsis is longer).
pub fn help(table: &[CommandDef], verb: &str) -> String {
    let mut o = String::new();
    for c in table {
        let s = c.synopsis(verb);
        if s.len() + 2 > HELP_COLUMN {
            o.push_str(&format!("  {s}\n  {:HELP_COLUMN$}{}\n", "", c.help));
        } else {
            o.push_str(&format!("  {s:<HELP_COLUMN$}{}\n", c.help));
        }
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn req(s: &str) -> Value {
        match parse_show(&words(s)) {
            Ok(c) => c.request,
            Err(e) => panic!("{s}: {e}"),
        }
    }

    #[test]
    fn every_row_is_well_formed() {
        for (verb, table) in [("show", SHOW), ("clear", CLEAR)] {
            for c in table {
                let r: Value = serde_json::from_str(c.request).expect(c.request);
                assert!(r["cmd"].is_string(), "{}", c.words);
                // The help column leaves room for 120 - HELP_COLUMN - 2.
                assert!(
                    !c.help.is_empty() && c.help.len() <= 120 - HELP_COLUMN - 2,
                    "{}",
                    c.words
                );
                for a in c.args {
                    let w = match a {
                        Arg::Keyword { word, .. } | Arg::Flag { word, .. } => *word,
                        Arg::Positional { .. } => continue,
                    };
                    assert!(c.usage.contains(w), "{verb} {}: usage misses {w}", c.words);
                    if let Arg::Flag { set, .. } = a {
                        assert!(serde_json::from_str::<Value>(set).unwrap().is_object());
                    }
                }
                // Every spelling parses to this row.
                for sp in c.spellings() {
                    let p = parse(table, verb, &words(sp)).unwrap();
                    assert_eq!(p.request["cmd"], r["cmd"], "{sp}");
                }
            }
            for line in help(table, verb).lines() {
                assert!(line.len() <= crate::show::MAX_WIDTH, "{line}");
            }
        }
    }

    #[test]
    fn parses_services_forms() {
        assert_eq!(
            req("access-lists edge all"),
            json!({"cmd": "show-access-lists", "name": "edge", "all": true})
        );
        assert_eq!(
            req("access-lists"),
            json!({"cmd": "show-access-lists", "all": false})
        );
        assert_eq!(
            req("access-lists interface p1"),
            json!({"cmd": "show-access-lists-attached", "interface": "p1", "all": false})
        );
        assert_eq!(
            req("access-lists vlan 10 all"),
            json!({"cmd": "show-access-lists-attached", "vlan": 10, "all": true})
        );
        assert!(parse_show(&words("access-lists vlan ten")).is_err());
        assert_eq!(req("storm-control"), json!({"cmd": "show-storm-control"}));
        let c = parse_clear(&words("errdisable sw2")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-errdisable", "port": "sw2"}));
        let c = parse_clear(&words("errdisable")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-errdisable"}));
        assert!(parse_clear(&words("errdisable a b")).is_err());
        assert_eq!(
            req("policy-map interface p1"),
            json!({"cmd": "show-policy-map-interface", "port": "p1"})
        );
        assert_eq!(
            req("flow cache top 5"),
            json!({"cmd": "show-flow-cache", "top": 5})
        );
        assert!(parse_show(&words("flow cache top 0")).is_err());
        assert!(parse_show(&words("flow cache bottom 5")).is_err());
    }

    #[test]
    fn parses_mac_forms() {
        assert_eq!(
            req("mac address-table vlan 10 count"),
            json!({"cmd": "show-mac-count", "vlan": 10})
        );
        assert_eq!(
            req("mac address-table count vlan 10"),
            json!({"cmd": "show-mac-count", "vlan": 10})
        );
        assert_eq!(req("mac address-table"), json!({"cmd": "show-mac"}));
        assert_eq!(
            req("mac address-table interface sw1 address 0200.0000.0001 dynamic"),
            json!({"cmd": "show-mac", "port": "sw1", "mac": "02:00:00:00:00:01", "type": "dynamic"})
        );
        assert!(parse_show(&words("mac address-table vlan 5000")).is_err());
        assert!(parse_show(&words("mac address-table vlan")).is_err());
        assert!(parse_show(&words("mac address-table address zz")).is_err());
        assert!(parse_show(&words("bogus")).is_err());
        let c = parse_clear(&words("mac address-table vlan 7")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-mac", "vlan": 7}));
    }

    #[test]
    fn routes_and_abbreviations() {
        assert_eq!(
            req("ip route summary"),
            json!({"cmd": "show-ip-route", "family": 4, "summary": true})
        );
        assert_eq!(
            req("ipv6 route 2001:db8::/32"),
            json!({"cmd": "show-ip-route", "family": 6, "prefix": "2001:db8::/32"})
        );
        assert_eq!(
            req("ip route vrf CUSTA 192.0.2.0/24"),
            json!({"cmd": "show-ip-route", "family": 4, "vrf": "CUSTA", "prefix": "192.0.2.0/24"})
        );
        assert_eq!(
            req("ipv6 route vrf CUSTB summary"),
            json!({"cmd": "show-ip-route", "family": 6, "vrf": "CUSTB", "summary": true})
        );
        assert!(parse_show(&words("ip route nonsense")).is_err());
        assert!(parse_show(&words("ip route 10.0.0.0/8 10.1.0.0/16")).is_err());
        // IOS habits: abbreviations, `ip` exact beats `ipv6`.
        assert_eq!(req("int"), json!({"cmd": "show-interfaces"}));
        assert_eq!(req("int status"), json!({"cmd": "show-interfaces"}));
        assert_eq!(req("int counters errors")["cmd"], json!("show-counters"));
        assert_eq!(req("ip ro")["family"], json!(4));
        assert_eq!(
            req("interfaces sw1"),
            json!({"cmd": "show-interfaces", "port": "sw1"})
        );
        // `i` alone is too short to abbreviate.
        assert!(parse_show(&words("i route")).is_err());
        let e = parse_show(&words("ip bogus")).err().unwrap();
        assert!(
            e.contains("did you mean") && e.contains("show ip route"),
            "{e}"
        );
    }

    #[test]
    fn flags_choose_renderers() {
        let c = parse_show(&words("ip route summary")).unwrap();
        assert_eq!(c.view, "ip-route-summary");
        let c = parse_show(&words("ip igmp snooping vlan 10 count")).unwrap();
        assert_eq!(c.view, "ip-igmp-snooping-count");
        assert_eq!(
            c.request,
            json!({"cmd": "show-igmp-snooping", "family": 4, "count": true, "vlan": 10})
        );
    }
}
