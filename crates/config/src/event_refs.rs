//! Event-manager references resolved against a whole configuration: a
//! patched configuration, a counter name checked against the ports,
//! VLANs and classes it names. Apart from `events` (the schema) so that
//! the schema module does not import the model that holds it.

use crate::events::{merge, CounterRef};
use crate::Config;

/// `config` with `patch` merged in, validated.
pub fn patched(config: &Config, patch: &serde_yaml_ng::Value) -> Result<Config, String> {
    let mut y = serde_yaml_ng::to_value(config).map_err(|e| e.to_string())?;
    merge(&mut y, patch);
    let text = serde_yaml_ng::to_string(&y).map_err(|e| e.to_string())?;
    crate::parse(&text, "patched configuration").map_err(|e| {
        e.iter()
            .map(|x| {
                if x.field.is_empty() {
                    x.message.clone()
                } else {
                    format!("{}: {}", x.field, x.message)
                }
            })
            .collect::<Vec<_>>()
            .join("; ")
    })
}

const PORT_FIELDS: &[&str] = &[
    "rx_frames",
    "rx_bytes",
    "tx_frames",
    "tx_bytes",
    "rx_flooded",
    "tx_flooded",
    "rx_multicast",
    "rx_broadcast",
    "tx_multicast",
    "tx_broadcast",
];
const VLAN_FIELDS: &[&str] = &["rx_frames", "rx_bytes", "tx_frames", "tx_bytes", "flooded"];
const L3_FIELDS: &[&str] = &[
    "rx_frames",
    "forwarded",
    "punted",
    "punt_queue_full",
    "icmp_sent",
    "icmp_suppressed",
];

fn one_of(what: &str, v: &str, ok: &[&str]) -> Result<(), String> {
    if ok.contains(&v) {
        Ok(())
    } else {
        Err(format!("unknown {what} {v:?} (one of: {})", ok.join(", ")))
    }
}

/// Parses `on.counter` and checks every name in it against `cfg`.
pub fn parse_counter(s: &str, cfg: &Config) -> Result<CounterRef, String> {
    use pipeline::counters::DropReason;
    let w: Vec<&str> = s.split_whitespace().collect();
    let drops: Vec<&str> = DropReason::ALL.iter().map(|r| r.name()).collect();
    let port = |p: &str| -> Result<String, String> {
        cfg.port_index(p)
            .map(|_| p.to_string())
            .ok_or_else(|| format!("no port {p:?}"))
    };
    match w.as_slice() {
        ["interface", p, "drops", r] => {
            one_of("drop reason", r, &drops)?;
            Ok(CounterRef::Port {
                port: port(p)?,
                field: format!("drops.{r}"),
            })
        }
        ["interface", p, f] => {
            one_of("interface counter", f, PORT_FIELDS)?;
            Ok(CounterRef::Port {
                port: port(p)?,
                field: f.to_string(),
            })
        }
        ["vlan", v, rest @ ..] => {
            let vlan: u16 = v
                .parse()
                .ok()
                .filter(|v| cfg.vlan_ids().contains(*v))
                .ok_or_else(|| format!("VLAN {v} is not configured"))?;
            let field = match rest {
                ["drops", r] => {
                    one_of("drop reason", r, &drops)?;
                    format!("drops.{r}")
                }
                [f] => {
                    one_of("VLAN counter", f, VLAN_FIELDS)?;
                    f.to_string()
                }
                _ => return Err(format!("{s:?}: expected `vlan N FIELD`")),
            };
            Ok(CounterRef::Vlan { vlan, field })
        }
        ["acl", name, rest @ ..] => {
            let acl = cfg
                .access_lists
                .iter()
                .find(|a| a.name == *name)
                .ok_or_else(|| format!("no access list {name:?}"))?;
            let rule = match rest {
                ["rule", n] => {
                    let n: u64 = n
                        .parse()
                        .ok()
                        .filter(|n| (1..=acl.rules.len() as u64).contains(n))
                        .ok_or_else(|| {
                            format!("access list {name} has rules 1..{}", acl.rules.len())
                        })?;
                    Some(n)
                }
                ["implicit-deny"] => None,
                _ => return Err(format!("{s:?}: expected `acl NAME rule N` or `acl NAME implicit-deny`")),
            };
            Ok(CounterRef::Acl {
                name: name.to_string(),
                rule,
            })
        }
        ["copp", class, f] => {
            let classes: Vec<&str> = pipeline::copp::CoppClass::ALL
                .iter()
                .map(|c| c.name())
                .collect();
            one_of("control-plane class", class, &classes)?;
            one_of("control-plane counter", f, &["passed", "dropped"])?;
            Ok(CounterRef::Copp {
                class: class.to_string(),
                field: f.to_string(),
            })
        }
        ["l3", "drops", r] => {
            let ok: Vec<&str> = pipeline::l3::L3Drop::ALL.iter().map(|d| d.name()).collect();
            one_of("layer-3 drop reason", r, &ok)?;
            Ok(CounterRef::L3 {
                field: format!("drops.{r}"),
            })
        }
        ["l3", "punts", r] => {
            let ok: Vec<&str> = pipeline::l3::Punt::ALL.iter().map(|d| d.name()).collect();
            one_of("punt reason", r, &ok)?;
            Ok(CounterRef::L3 {
                field: format!("punts.{r}"),
            })
        }
        ["l3", f] => {
            one_of("layer-3 counter", f, L3_FIELDS)?;
            Ok(CounterRef::L3 { field: f.to_string() })
        }
        ["class", p, dir, class, f] => {
            one_of("direction", dir, &["in", "out"])?;
            one_of("class counter", f, &["packets", "bytes"])?;
            let pc = cfg
                .ports
                .iter()
                .find(|x| x.name == *p)
                .ok_or_else(|| format!("no port {p:?}"))?;
            let _ = pc;
            if !cfg.class_maps.iter().any(|c| c.name == *class) && *class != "class-default" {
                return Err(format!("no class map {class:?}"));
            }
            Ok(CounterRef::Class {
                port: p.to_string(),
                direction: dir.to_string(),
                class: class.to_string(),
                field: f.to_string(),
            })
        }
        _ => Err(format!(
            "unknown counter {s:?} (interface PORT FIELD | interface PORT drops REASON | vlan N FIELD | \
             acl NAME rule N | acl NAME implicit-deny | copp CLASS passed|dropped | l3 FIELD | \
             l3 drops|punts REASON | class PORT in|out CLASS packets|bytes)"
        )),
    }
}
