//! Running a policy's actions, in order. Each action's result (output or
//! error) is recorded; a failure is logged and the next action runs.

use crate::{ActionResult, Env, Run, Trigger};
use config::event_refs::patched;
use config::events::{fill, substitute, Action, EventManager, Mail, Policy, Script};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

/// Network actions (mail, webhook) give up after this.
const NET_TIMEOUT: Duration = Duration::from_secs(10);
/// Output kept per action.
const MAX_OUTPUT: usize = 64 * 1024;

pub(crate) fn run(env: &Env, em: &EventManager, p: &Policy, t: &Trigger) -> Run {
    let started = Instant::now();
    let detect_us = started.duration_since(t.at).as_micros() as u64;
    let value = t.value.map(|v| v.to_string()).unwrap_or_default();
    let mut vars: Vec<(String, String)> = vec![
        ("policy".into(), p.name.clone()),
        ("event".into(), t.detail.clone()),
        ("value".into(), value),
    ];
    vars.extend(t.vars.iter().cloned());
    for k in ["interface", "source", "message"] {
        if !vars.iter().any(|(n, _)| n == k) {
            vars.push((k.into(), String::new()));
        }
    }
    let vr: Vec<(&str, &str)> = vars.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let mut results: Vec<ActionResult> = Vec::new();
    for a in &p.actions {
        let t0 = Instant::now();
        let (name, r) = one(env, em, p, t, a, &vr, &results);
        if let Err(e) = &r {
            tracing::warn!(target: "events", "event manager: policy {}: {name} failed: {e}", p.name);
        }
        let (ok, mut output) = match r {
            Ok(o) => (true, o),
            Err(e) => (false, e),
        };
        if output.len() > MAX_OUTPUT {
            let mut cut = MAX_OUTPUT;
            while !output.is_char_boundary(cut) {
                cut -= 1;
            }
            output.truncate(cut);
            output.push_str("\n[output truncated]");
        }
        results.push(ActionResult {
            action: name,
            ok,
            output,
            ms: t0.elapsed().as_millis() as u64,
        });
    }
    Run {
        policy: p.name.clone(),
        trigger: t.detail.clone(),
        time: crate::unix_time(),
        detect_to_action_us: detect_us,
        results,
    }
}

fn one(
    env: &Env,
    em: &EventManager,
    p: &Policy,
    t: &Trigger,
    a: &Action,
    vars: &[(&str, &str)],
    done: &[ActionResult],
) -> (String, Result<String, String>) {
    if let Some(l) = &a.log {
        let line = fill(l, vars);
        tracing::warn!(target: "events", "event manager: {}: {line}", p.name);
        return ("log".into(), Ok(line));
    }
    if let Some(s) = &a.show {
        return (format!("show {s}"), cli(env, "show", &fill(s, vars)));
    }
    if let Some(s) = &a.clear {
        return (format!("clear {s}"), cli(env, "clear", &fill(s, vars)));
    }
    if let Some(m) = &a.mail {
        return (format!("mail {}", m.to), mail(em, p, t, m, vars, done));
    }
    if let Some(u) = &a.webhook {
        return (format!("webhook {u}"), webhook(u, p, t, vars, done));
    }
    if let Some(s) = &a.syslog {
        let msg = fill(&s.message, vars);
        match s.severity.as_deref().unwrap_or("warning") {
            "emergency" | "alert" | "critical" | "error" => {
                tracing::error!(target: "events::syslog", "{msg}")
            }
            "warning" => tracing::warn!(target: "events::syslog", "{msg}"),
            "debug" => tracing::debug!(target: "events::syslog", "{msg}"),
            _ => tracing::info!(target: "events::syslog", "{msg}"),
        }
        return ("syslog".into(), Ok(msg));
    }
    if let Some(s) = &a.script {
        return (format!("script {}", s.path), script(s, vars, &*env.stop));
    }
    if let Some(pa) = &a.apply {
        return (
            "apply".into(),
            apply(env, p, &substitute(&pa.patch, vars), pa.revert_after),
        );
    }
    ("none".into(), Err("no action".into()))
}

/// A `show`/`clear` command through the API, rendered as the CLI does.
fn cli(env: &Env, verb: &str, words: &str) -> Result<String, String> {
    let w: Vec<String> = words.split_whitespace().map(String::from).collect();
    let c = if verb == "show" {
        mgmt::cli::parse_show(&w)?
    } else {
        mgmt::cli::parse_clear(&w)?
    };
    let r = (env.query)(&c.request);
    if r.get("ok") == Some(&Value::Bool(true)) {
        Ok(format!("{verb} {words}\n{}", (c.render)(&r["data"])))
    } else {
        Err(r["error"].as_str().unwrap_or("error").to_string())
    }
}

fn attachments(done: &[ActionResult]) -> String {
    let mut s = String::new();
    for r in done.iter().filter(|r| {
        r.ok && (r.action.starts_with("show")
            || r.action.starts_with("clear")
            || r.action.starts_with("script"))
    }) {
        s.push_str(&format!(
            "\n--- {} ---\n{}\n",
            r.action,
            r.output.trim_end()
        ));
    }
    s
}

/// One SMTP reply (multi-line aware); its code.
fn smtp_reply(r: &mut impl BufRead) -> Result<(u32, String), String> {
    let mut all = String::new();
    loop {
        let mut line = String::new();
        if r.read_line(&mut line).map_err(|e| format!("smtp: {e}"))? == 0 {
            return Err("smtp: connection closed".into());
        }
        all.push_str(&line);
        if line.len() < 4 || line.as_bytes()[3] != b'-' {
            let code = line
                .get(..3)
                .and_then(|c| c.parse().ok())
                .ok_or("smtp: bad reply")?;
            return Ok((code, all.trim_end().to_string()));
        }
    }
}

fn mail(
    em: &EventManager,
    p: &Policy,
    t: &Trigger,
    m: &Mail,
    vars: &[(&str, &str)],
    done: &[ActionResult],
) -> Result<String, String> {
    let relay = em.smtp_relay.as_deref().ok_or("no smtp-relay")?;
    let addr = relay
        .to_socket_addrs()
        .map_err(|e| format!("{relay}: {e}"))?
        .next()
        .ok_or_else(|| format!("{relay}: no address"))?;
    let s =
        TcpStream::connect_timeout(&addr, NET_TIMEOUT).map_err(|e| format!("smtp {relay}: {e}"))?;
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    let _ = s.set_write_timeout(Some(NET_TIMEOUT));
    let mut r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
    let mut w = s;
    let subject = fill(
        m.subject
            .as_deref()
            .unwrap_or("[lanyard] {policy}: {event}"),
        vars,
    );
    let to = fill(&m.to, vars);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "lanyard".into());
    let mut body = format!(
        "Policy: {}\nEvent: {}\nTime: {} (unix)\n",
        p.name,
        t.detail,
        crate::unix_time()
    );
    body.push_str(&attachments(done));
    let mut step = |cmd: Option<String>, want: u32| -> Result<(), String> {
        if let Some(c) = cmd {
            w.write_all(c.as_bytes())
                .map_err(|e| format!("smtp: {e}"))?;
        }
        let (code, text) = smtp_reply(&mut r)?;
        if code != want {
            return Err(format!("smtp: expected {want}, got {text}"));
        }
        Ok(())
    };
    step(None, 220)?;
    step(Some(format!("HELO {host}\r\n")), 250)?;
    step(Some(format!("MAIL FROM:<{}>\r\n", em.mail_from)), 250)?;
    step(Some(format!("RCPT TO:<{to}>\r\n")), 250)?;
    step(Some("DATA\r\n".into()), 354)?;
    let mut msg = format!(
        "From: {}\r\nTo: {to}\r\nSubject: {subject}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n",
        em.mail_from
    );
    for line in body.lines() {
        // Dot-stuffing (RFC 5321 4.5.2).
        if line.starts_with('.') {
            msg.push('.');
        }
        msg.push_str(line);
        msg.push_str("\r\n");
    }
    msg.push_str(".\r\n");
    step(Some(msg), 250)?;
    let _ = step(Some("QUIT\r\n".into()), 221);
    Ok(format!("sent to {to} via {relay}: {subject}"))
}

fn webhook(
    url: &str,
    p: &Policy,
    t: &Trigger,
    vars: &[(&str, &str)],
    done: &[ActionResult],
) -> Result<String, String> {
    let rest = url.strip_prefix("http://").ok_or("only http:// URLs")?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let target = if hostport.contains(':') {
        hostport.to_string()
    } else {
        format!("{hostport}:80")
    };
    let addr = target
        .to_socket_addrs()
        .map_err(|e| format!("{target}: {e}"))?
        .next()
        .ok_or("no address")?;
    let body = json!({
        "policy": p.name,
        "event": t.detail,
        "value": t.value,
        "time": crate::unix_time(),
        "vars": vars.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
        "results": done,
    })
    .to_string();
    let mut s =
        TcpStream::connect_timeout(&addr, NET_TIMEOUT).map_err(|e| format!("{url}: {e}"))?;
    let _ = s.set_read_timeout(Some(NET_TIMEOUT));
    let _ = s.set_write_timeout(Some(NET_TIMEOUT));
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {hostport}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(|e| format!("{url}: {e}"))?;
    let mut status = String::new();
    BufReader::new(&s)
        .read_line(&mut status)
        .map_err(|e| format!("{url}: {e}"))?;
    let code: u32 = status
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("{url}: bad answer {status:?}"))?;
    if (200..300).contains(&code) {
        Ok(format!("{url}: {}", status.trim_end()))
    } else {
        Err(format!("{url}: {}", status.trim_end()))
    }
}

fn script(
    s: &Script,
    vars: &[(&str, &str)],
    stop: &(dyn Fn() -> bool + Send + Sync),
) -> Result<String, String> {
    use std::process::{Command, Stdio};
    let mut c = Command::new(&s.path);
    c.args(s.args.iter().map(|a| fill(a, vars)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        c.env(format!("LANYARD_{}", k.to_ascii_uppercase()), v);
    }
    let mut child = c.spawn().map_err(|e| format!("{}: {e}", s.path))?;
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(r) = r {
                let _ = r.take(MAX_OUTPUT as u64).read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|x| Box::new(x) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|x| Box::new(x) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + Duration::from_secs(s.timeout as u64);
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < deadline && !stop() => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let mut text = String::from_utf8_lossy(&out.join().unwrap_or_default()).into_owned();
    let e = String::from_utf8_lossy(&err.join().unwrap_or_default()).into_owned();
    if !e.is_empty() {
        text.push_str(&e);
    }
    match status {
        Some(st) if st.success() => Ok(text),
        Some(st) => Err(format!("{} exited with {st}: {text}", s.path)),
        None => Err(format!("{} killed after {} s: {text}", s.path, s.timeout)),
    }
}

/// Merge `patch` into the running configuration and apply it; with
/// `revert`, put the configuration back after that many seconds unless it
/// was changed meanwhile.
fn apply(
    env: &Env,
    p: &Policy,
    patch: &serde_yaml_ng::Value,
    revert: Option<u32>,
) -> Result<String, String> {
    let before = (env.running)();
    let new = patched(&before, patch)?;
    if new == *before {
        return Ok("no change (the patch is already in the running configuration)".into());
    }
    let r = (env.apply)(new.clone())?;
    let changes = r["changes"]
        .as_array()
        .map(|c| {
            c.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    tracing::info!(target: "events", "event manager: policy {} applied a patch: {changes}", p.name);
    if let Some(secs) = revert {
        let (running, applyf, stop, name) = (
            env.running.clone(),
            env.apply.clone(),
            env.stop.clone(),
            p.name.clone(),
        );
        let _ = std::thread::Builder::new().name("event-revert".into()).spawn(move || {
            let until = Instant::now() + Duration::from_secs(secs as u64);
            while Instant::now() < until {
                if stop() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            let now = running();
            let mut cur = (*now).clone();
            let mut applied = new.clone();
            // The event manager section may have been re-applied as is.
            cur.event_manager = None;
            applied.event_manager = None;
            if cur != applied {
                tracing::warn!(target: "events", "event manager: policy {name}: patch not reverted, the configuration changed since");
                return;
            }
            let mut back = (*before).clone();
            back.event_manager = now.event_manager.clone();
            match applyf(back) {
                Ok(_) => tracing::info!(target: "events", "event manager: policy {name}: patch reverted after {secs} s"),
                Err(e) => tracing::warn!(target: "events", "event manager: policy {name}: revert failed: {e}"),
            }
        });
    }
    Ok(format!(
        "applied: {changes}{}",
        revert
            .map(|s| format!(" (revert in {s} s)"))
            .unwrap_or_default()
    ))
}
