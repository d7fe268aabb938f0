//! Operator command words (`show mac address-table vlan 10 count`) turned
//! into API requests and renderers. Commands are data: one table row each.

use crate::show;
use serde_json::{json, Value};

/// A parsed `show` or `clear` command.
pub struct Command {
    pub request: Value,
    pub render: fn(&Value) -> String,
}

fn vlan_arg(words: &[&str]) -> Result<(Option<u16>, Vec<String>), String> {
    let mut vlan = None;
    let mut rest = Vec::new();
    let mut i = 0;
    while i < words.len() {
        if words[i] == "vlan" {
            let v = words
                .get(i + 1)
                .ok_or("\"vlan\" needs a VLAN id")?
                .parse::<u16>()
                .ok()
                .filter(|v| (1..=4094).contains(v))
                .ok_or_else(|| format!("bad VLAN id {:?}: expected 1..4094", words[i + 1]))?;
            vlan = Some(v);
            i += 2;
        } else {
            rest.push(words[i].to_string());
            i += 1;
        }
    }
    Ok((vlan, rest))
}

const SHOW_HELP: &str = "show interfaces | vlan | mac address-table [vlan N] [count] | counters | version | ip interface | ip route [summary|PREFIX|ADDRESS] | ipv6 route [...] | arp | ipv6 neighbors | access-lists [NAME | interface PORT | vlan N] [all] | policy-map interface [PORT] | flow cache [top N] | monitor | control-plane | storm-control | loop-detect | backup-pairs | port-channel | ip igmp snooping groups [vlan N] [count] | ipv6 mld snooping groups [vlan N] [count] | ip mroute [summary] | ipv6 mroute [summary]";

/// `show ip route …` / `show ipv6 route …`.
fn route_command(family: u8, rest: &[&str]) -> Result<Command, String> {
    match rest {
        [] => Ok(Command {
            request: json!({"cmd": "show-ip-route", "family": family}),
            render: show::routes,
        }),
        ["summary"] => Ok(Command {
            request: json!({"cmd": "show-ip-route", "family": family, "summary": true}),
            render: show::route_summary,
        }),
        [p] => {
            let ok = match p.split_once('/') {
                Some((a, l)) => a.parse::<std::net::IpAddr>().is_ok() && l.parse::<u8>().is_ok(),
                None => p.parse::<std::net::IpAddr>().is_ok(),
            };
            if !ok {
                return Err(format!("{p:?} is not an address or prefix"));
            }
            Ok(Command {
                request: json!({"cmd": "show-ip-route", "family": family, "prefix": p}),
                render: show::routes,
            })
        }
        _ => Err(format!(
            "unexpected {:?}; usage: {SHOW_HELP}",
            rest.join(" ")
        )),
    }
}

/// Parse the words after `show`.
pub fn parse_show(words: &[String]) -> Result<Command, String> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    let cmd = match w.as_slice() {
        ["interfaces"] | ["interface"] => Command {
            request: json!({"cmd": "show-interfaces"}),
            render: show::interfaces,
        },
        ["vlan"] | ["vlans"] | ["vlan", "brief"] => Command {
            request: json!({"cmd": "show-vlans"}),
            render: show::vlans,
        },
        ["counters"] => Command {
            request: json!({"cmd": "show-counters"}),
            render: show::counters,
        },
        ["version"] => Command {
            request: json!({"cmd": "show-version"}),
            render: |v| format!("{v:#}\n"),
        },
        ["ip", "interface", ..] | ["ip", "interfaces", ..] => Command {
            request: json!({"cmd": "show-ip-interfaces"}),
            render: show::ip_interfaces,
        },
        ["arp"] | ["ip", "arp"] => Command {
            request: json!({"cmd": "show-arp"}),
            render: show::neighbors,
        },
        ["ipv6", "neighbors"] | ["ipv6", "neighbours"] => Command {
            request: json!({"cmd": "show-ipv6-neighbors"}),
            render: show::neighbors,
        },
        ["access-lists", rest @ ..] | ["access-list", rest @ ..] => {
            let all = rest.last() == Some(&"all");
            let rest = &rest[..rest.len() - all as usize];
            match rest {
                [] => Command {
                    request: json!({"cmd": "show-access-lists", "all": all}),
                    render: show::access_lists,
                },
                [name] => Command {
                    request: json!({"cmd": "show-access-lists", "name": name, "all": all}),
                    render: show::access_lists,
                },
                ["interface", port] => Command {
                    request: json!({"cmd": "show-access-lists-attached", "interface": port, "all": all}),
                    render: show::access_lists_attached,
                },
                ["vlan", v] => Command {
                    request: json!({"cmd": "show-access-lists-attached",
                                    "vlan": v.parse::<u16>().map_err(|_| format!("{v:?} is not a VLAN id"))?,
                                    "all": all}),
                    render: show::access_lists_attached,
                },
                _ => return Err(format!("usage: {SHOW_HELP}")),
            }
        }
        ["policy-map", "interface", rest @ ..] => match rest {
            [] => Command {
                request: json!({"cmd": "show-policy-map-interface"}),
                render: show::policy_maps,
            },
            [port] => Command {
                request: json!({"cmd": "show-policy-map-interface", "port": port}),
                render: show::policy_maps,
            },
            _ => return Err(format!("usage: {SHOW_HELP}")),
        },
        ["control-plane"] | ["policy-map", "control-plane"] => Command {
            request: json!({"cmd": "show-copp"}),
            render: show::copp,
        },
        ["backup-pairs"] | ["backup-pair"] | ["interfaces", "switchport", "backup"] => Command {
            request: json!({"cmd": "show-backup-pairs"}),
            render: show::backup_pairs,
        },
        ["port-channel"] | ["port-channels"] | ["etherchannel"] | ["lacp"] => Command {
            request: json!({"cmd": "show-port-channel"}),
            render: show::port_channels,
        },
        ["storm-control"] => Command {
            request: json!({"cmd": "show-storm-control"}),
            render: show::storm_control,
        },
        ["loop-detect"] => Command {
            request: json!({"cmd": "show-loop-detect"}),
            render: show::loop_detect,
        },
        ["monitor"] | ["monitor", "session"] | ["monitor", "sessions"] => Command {
            request: json!({"cmd": "show-monitor"}),
            render: show::monitor,
        },
        ["flow", "cache", rest @ ..] => {
            let top = match rest {
                [] => 20,
                ["top", n] => n
                    .parse::<u64>()
                    .ok()
                    .filter(|n| (1..=10_000).contains(n))
                    .ok_or_else(|| format!("top {n:?}: expected a number 1..10000"))?,
                _ => return Err(format!("usage: {SHOW_HELP}")),
            };
            Command {
                request: json!({"cmd": "show-flow-cache", "top": top}),
                render: show::flow_cache,
            }
        }
        ["ip", "igmp", "snooping", rest @ ..] | ["ipv6", "mld", "snooping", rest @ ..] => {
            let family = if w[0] == "ipv6" { 6 } else { 4 };
            let rest = match rest {
                ["groups", r @ ..] => r,
                r => r,
            };
            let (vlan, rest) = vlan_arg(rest)?;
            let count = match rest.as_slice() {
                [] => false,
                [c] if c == "count" => true,
                _ => {
                    return Err(format!(
                        "unexpected {:?}; usage: {SHOW_HELP}",
                        rest.join(" ")
                    ))
                }
            };
            Command {
                request: json!({"cmd": "show-igmp-snooping", "family": family, "vlan": vlan, "count": count}),
                render: if count {
                    show::snooping_count
                } else {
                    show::snooping_groups
                },
            }
        }
        ["ip", "mroute", rest @ ..] | ["ipv6", "mroute", rest @ ..] => {
            let family = if w[0] == "ipv6" { 6 } else { 4 };
            let summary = match rest {
                [] => false,
                ["summary"] | ["count"] => true,
                _ => {
                    return Err(format!(
                        "unexpected {:?}; usage: {SHOW_HELP}",
                        rest.join(" ")
                    ))
                }
            };
            Command {
                request: json!({"cmd": "show-mroute", "family": family, "summary": summary}),
                render: show::mroutes,
            }
        }
        ["ip", "route", rest @ ..] => route_command(4, rest)?,
        ["ipv6", "route", rest @ ..] => route_command(6, rest)?,
        ["mac", "address-table", rest @ ..] => {
            let (vlan, rest) = vlan_arg(rest)?;
            match rest.as_slice() {
                [] => Command {
                    request: json!({"cmd": "show-mac", "vlan": vlan}),
                    render: show::mac_table,
                },
                [c] if c == "count" => Command {
                    request: json!({"cmd": "show-mac-count", "vlan": vlan}),
                    render: show::mac_count,
                },
                _ => {
                    return Err(format!(
                        "unexpected {:?}; usage: {SHOW_HELP}",
                        rest.join(" ")
                    ))
                }
            }
        }
        _ => {
            return Err(format!(
                "unknown command \"show {}\"; usage: {SHOW_HELP}",
                w.join(" ")
            ))
        }
    };
    Ok(cmd)
}

/// Parse the words after `clear`.
pub fn parse_clear(words: &[String]) -> Result<Command, String> {
    let w: Vec<&str> = words.iter().map(String::as_str).collect();
    match w.as_slice() {
        ["mac", "address-table", rest @ ..] => {
            let (vlan, rest) = vlan_arg(rest)?;
            if !rest.is_empty() {
                return Err(format!("unexpected {:?}", rest.join(" ")));
            }
            Ok(Command {
                request: json!({"cmd": "clear-mac", "vlan": vlan}),
                render: |v| format!("cleared {} dynamic entries\n", v["cleared"]),
            })
        }
        ["errdisable", rest @ ..] if rest.len() <= 1 => Ok(Command {
            request: json!({"cmd": "clear-errdisable", "port": rest.first()}),
            render: |v| {
                let ports: Vec<&str> = v["cleared"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                if ports.is_empty() {
                    "no port was err-disabled\n".into()
                } else {
                    format!("err-disable cleared on {}\n", ports.join(", "))
                }
            },
        }),
        _ => Err(format!(
            "unknown command \"clear {}\"; usage: clear mac address-table [vlan N] | clear errdisable [PORT]",
            w.join(" ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_services_forms() {
        let c = parse_show(&words("access-lists edge all")).unwrap();
        assert_eq!(
            c.request,
            json!({"cmd": "show-access-lists", "name": "edge", "all": true})
        );
        let c = parse_show(&words("access-lists")).unwrap();
        assert_eq!(c.request, json!({"cmd": "show-access-lists", "all": false}));
        let c = parse_show(&words("access-lists interface p1")).unwrap();
        assert_eq!(
            c.request,
            json!({"cmd": "show-access-lists-attached", "interface": "p1", "all": false})
        );
        let c = parse_show(&words("access-lists vlan 10 all")).unwrap();
        assert_eq!(
            c.request,
            json!({"cmd": "show-access-lists-attached", "vlan": 10, "all": true})
        );
        assert!(parse_show(&words("access-lists vlan ten")).is_err());
        let c = parse_show(&words("policy-map interface p1")).unwrap();
        assert_eq!(
            c.request,
            json!({"cmd": "show-policy-map-interface", "port": "p1"})
        );
        let c = parse_show(&words("flow cache top 5")).unwrap();
        assert_eq!(c.request, json!({"cmd": "show-flow-cache", "top": 5}));
        assert!(parse_show(&words("flow cache top 0")).is_err());
        assert!(parse_show(&words("flow cache bottom 5")).is_err());
    }

    #[test]
    fn parses_mac_forms() {
        let c = parse_show(&words("mac address-table vlan 10 count")).unwrap();
        assert_eq!(c.request, json!({"cmd": "show-mac-count", "vlan": 10}));
        let c = parse_show(&words("mac address-table")).unwrap();
        assert_eq!(c.request, json!({"cmd": "show-mac", "vlan": null}));
        assert!(parse_show(&words("mac address-table vlan 5000")).is_err());
        assert!(parse_show(&words("mac address-table vlan")).is_err());
        assert!(parse_show(&words("bogus")).is_err());
        let c = parse_clear(&words("mac address-table vlan 7")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-mac", "vlan": 7}));
        let c = parse_clear(&words("errdisable sw2")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-errdisable", "port": "sw2"}));
        let c = parse_clear(&words("errdisable")).unwrap();
        assert_eq!(c.request, json!({"cmd": "clear-errdisable", "port": null}));
        assert!(parse_clear(&words("errdisable a b")).is_err());
        assert_eq!(
            parse_show(&words("storm-control")).unwrap().request,
            json!({"cmd": "show-storm-control"})
        );
    }
}
