//! `lanyard`: the switch and its test bed, one binary. Glue only: every
//! command is parsed here and carried out by a library crate.

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

const DEFAULT_SOCKET: &str = "/run/lanyard/lanyard.sock";

#[derive(Parser)]
#[command(
    name = "lanyard",
    version,
    about = "A software multilayer switch/router for Linux, and its test bed"
)]
struct Cli {
    /// Management socket (default: $LANYARD_SOCKET or /run/lanyard/lanyard.sock)
    #[arg(
        long,
        env = "LANYARD_SOCKET",
        default_value = DEFAULT_SOCKET,
        value_name = "PATH",
        hide_env = true,
        hide_default_value = true
    )]
    socket: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

/// `--socket` after a command that talks to a running switch.
#[derive(Args)]
struct SocketOpt {
    /// Management socket of the switch (default: $LANYARD_SOCKET or /run/lanyard/lanyard.sock)
    #[arg(long = "socket", value_name = "PATH")]
    socket: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the switch in the foreground (logs to stderr; SIGINT/SIGTERM stop it).
    Run {
        /// Configuration file (YAML; docs/config.md; check it with `config check`).
        #[arg(long, short, value_name = "FILE")]
        config: PathBuf,
        /// Socket to serve (default: $LANYARD_SOCKET, else the config's management.socket)
        #[arg(long = "socket", value_name = "PATH")]
        socket: Option<PathBuf>,
    },
    /// Configuration tools: check, diff, apply, rollback.
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Show the switch's state as tables (--json: the API's JSON answer).
    #[command(arg_required_else_help = true)]
    Show {
        /// Print the management API's JSON answer instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketOpt,
        /// One of the commands listed above, e.g. `mac address-table vlan 10`.
        #[arg(required = true, num_args = 1.., value_name = "COMMAND")]
        words: Vec<String>,
    },
    /// Clear state: mac address-table [vlan N], errdisable [PORT].
    #[command(arg_required_else_help = true)]
    Clear {
        /// Print the management API's JSON answer.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketOpt,
        /// One of the commands listed above.
        #[arg(required = true, num_args = 1.., value_name = "COMMAND")]
        words: Vec<String>,
    },
    /// Restart the data plane in place, keeping learned addresses.
    ///
    /// Same PID (e.g. after an upgrade); prints nothing until the switch
    /// is back.
    Restart {
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Bypass (wire) mode: forward without services (ACLs, QoS, flows).
    Bypass {
        /// on | off | status
        state: String,
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Diagnostics that disturb a port: cable-diagnostics PORT.
    Test {
        #[command(subcommand)]
        cmd: TestCmd,
    },
    /// Inline service control's subscribers: bulk provisioning.
    Subscribers {
        #[command(subcommand)]
        cmd: SubscribersCmd,
    },
    /// The test bed: run plans against Lanyard and peer switches.
    Lab {
        #[command(subcommand)]
        cmd: LabCmd,
    },
}

#[derive(Subcommand)]
enum TestCmd {
    /// The PHY's cable test on PORT: status and fault distance per pair
    /// (with --tdr: the raw TDR trace, amplitude per distance and pair).
    /// The link drops while it runs.
    CableDiagnostics {
        port: String,
        /// The raw TDR trace instead of a verdict per pair.
        #[arg(long)]
        tdr: bool,
        /// TDR: first distance, metres (the PHY's default if not given).
        #[arg(long, requires = "tdr", value_name = "M")]
        from: Option<f64>,
        /// TDR: last distance, metres (at most 150).
        #[arg(long, requires = "tdr", value_name = "M")]
        to: Option<f64>,
        /// TDR: distance between samples, metres.
        #[arg(long, requires = "tdr", value_name = "M")]
        step: Option<f64>,
        /// TDR: only this pair (A-D).
        #[arg(long, requires = "tdr", value_name = "A-D")]
        pair: Option<String>,
        /// Print the management API's JSON answer.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        socket: SocketOpt,
    },
}

#[derive(Subcommand)]
enum SubscribersCmd {
    /// Stream provisioning records (docs/inline.md: `add|set|del ID
    /// package=… addr=…`) from FILE, or standard input for `-`, to the
    /// switch. All or nothing unless --skip-errors.
    Load {
        /// The records; `-` reads standard input.
        file: PathBuf,
        /// Apply the good records and report the bad ones.
        #[arg(long)]
        skip_errors: bool,
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Start subscriber ID's quota account again (a new billing period):
    /// used bytes to zero, its traffic flows again.
    ResetUsage {
        id: String,
        #[command(flatten)]
        socket: SocketOpt,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate a configuration file; every error names file, line and field.
    Check {
        /// Configuration file (YAML; docs/config.md).
        file: PathBuf,
    },
    /// What applying FILE to the running switch would change.
    Diff {
        /// The new configuration file.
        file: PathBuf,
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Apply FILE to the running switch without interrupting traffic
    /// (atomic: nothing changes if any part fails).
    Apply {
        /// The new configuration file.
        file: PathBuf,
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Go back to the configuration before the last apply.
    Rollback {
        #[command(flatten)]
        socket: SocketOpt,
    },
    /// Print FRR ldpd's `l2vpn` stanzas for FILE's LDP-signalled
    /// pseudowires (paste into frr.conf; docs/frr.md).
    Ldpd {
        /// Configuration file (YAML; docs/config.md).
        file: PathBuf,
    },
}

#[derive(Subcommand)]
enum LabCmd {
    /// Run a plan (YAML) and print the comparison tables.
    Run {
        /// Test plan (YAML; examples in plans/, reference in docs/lab.md).
        plan: PathBuf,
        /// Where to write JSON, CSV and SVG results (default lab-results/<time>/).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Print nothing (no progress, no tables): results go to the files only.
        #[arg(long, short)]
        quiet: bool,
        /// Run N times (DUTs reversed on even runs); min/median/max per cell in DIR/repeat.txt
        #[arg(long, value_name = "N", default_value_t = 1)]
        repeat: usize,
    },
    /// Validate plans without running them (errors as FILE:LINE: field: problem).
    Check {
        /// Plan files.
        #[arg(required = true)]
        plans: Vec<PathBuf>,
    },
    /// Per-cell ratios between two result directories (B / A), with the
    /// spread of repeated runs.
    Compare {
        /// Result directory A (report.json, or run-*/ of a --repeat run).
        a: PathBuf,
        /// Result directory B.
        b: PathBuf,
        /// Where to write compare.txt and compare.json (default lab-results/compare-<time>/).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Measure the test bed's ceiling (and trafgen's rate, if installed).
    Calibrate {
        /// Where to write calibration.json (default lab-results/<time>/).
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
}

/// Every command, one line each, for `lanyard help`.
fn command_list() -> String {
    let other = [
        ("run --config FILE", "run the switch in the foreground"),
        ("config check FILE", "validate a configuration file"),
        (
            "config diff FILE",
            "what applying FILE to the running switch would change",
        ),
        (
            "config apply FILE",
            "apply FILE to the running switch, hitless and atomic",
        ),
        (
            "config rollback",
            "back to the configuration before the last apply",
        ),
        (
            "config ldpd FILE",
            "print FRR ldpd's l2vpn stanzas for FILE's pseudowires",
        ),
        (
            "restart",
            "restart the data plane in place, keeping learned addresses",
        ),
        (
            "bypass on | off | status",
            "forward without services (ACLs, QoS, flows)",
        ),
        (
            "subscribers load FILE|- [--skip-errors]",
            "stream subscriber records to service control (docs/inline.md)",
        ),
        (
            "subscribers reset-usage ID",
            "start a subscriber's quota period again",
        ),
        (
            "test cable-diagnostics PORT [--tdr]",
            "the PHY's cable test per pair (--tdr: the raw reflection trace)",
        ),
        (
            "lab run PLAN [--out DIR] [--repeat N] [-q]",
            "run a test plan, print the comparison tables",
        ),
        (
            "lab check PLAN...",
            "validate test plans without running them",
        ),
        (
            "lab compare RUN_A RUN_B [--out DIR]",
            "per-cell ratios between two result directories",
        ),
        (
            "lab calibrate [--out DIR]",
            "measure the test bed's ceiling",
        ),
    ];
    let mut o =
        String::from("Every command (show and clear words may be abbreviated: show int):\n");
    for (c, h) in other {
        o.push_str(&format!("  {c:<w$}{h}\n", w = mgmt::cli::HELP_COLUMN));
    }
    o.push_str(&mgmt::cli::help(mgmt::cli::SHOW, "show"));
    o.push_str(&mgmt::cli::help(mgmt::cli::CLEAR, "clear"));
    o.push_str("\nshow and clear take --json (the API's JSON answer) and --socket PATH.");
    o
}

/// The clap command with the help lists generated from the command tables.
fn command() -> clap::Command {
    Cli::command()
        .after_help(command_list())
        .mut_subcommand("show", |c| {
            c.before_help(format!(
                "Commands (words may be abbreviated: show int, show ip ro):\n{}",
                mgmt::cli::help(mgmt::cli::SHOW, "show")
            ))
            .help_template(
                "{about-with-newline}\n{before-help}{usage-heading} {usage}\n\n{all-args}",
            )
        })
        .mut_subcommand("clear", |c| {
            c.before_help(format!(
                "Commands:\n{}",
                mgmt::cli::help(mgmt::cli::CLEAR, "clear")
            ))
            .help_template(
                "{about-with-newline}\n{before-help}{usage-heading} {usage}\n\n{all-args}",
            )
        })
}

/// A path the daemon (another process, maybe another cwd) can open.
fn absolute(p: &std::path::Path) -> Result<String, String> {
    std::fs::canonicalize(p)
        .map(|p| p.to_string_lossy().into_owned())
        .map_err(|e| format!("{}: {e}", p.display()))
}

/// `lanyard restart`: ask, then wait until the switch answers again.
fn restart(socket: &std::path::Path) -> Result<(), String> {
    let t0 = std::time::Instant::now();
    control::api::request(socket, &serde_json::json!({"cmd": "restart"}))?;
    // The old image removes its socket before exec: wait for it to go,
    // then for the new image to answer.
    let ver = serde_json::json!({"cmd": "show-version"});
    let mut gone = false;
    while t0.elapsed() < std::time::Duration::from_secs(60) {
        let up = control::api::request(socket, &ver).is_ok();
        if !up {
            gone = true;
        } else if gone {
            println!("restarted in {} ms", t0.elapsed().as_millis());
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Err("the switch did not come back within 60 s".into())
}

fn api(socket: &std::path::Path, cmd: mgmt::cli::Command, json: bool) -> Result<(), String> {
    let data = control::api::request(socket, &cmd.request)?;
    if json {
        println!("{data}");
    } else {
        print!("{}", (cmd.render)(&data));
    }
    Ok(())
}

fn lab_options(out: Option<PathBuf>, quiet: bool) -> Result<lab::LabOptions, String> {
    Ok(lab::LabOptions {
        lanyard_bin: std::env::current_exe().map_err(|e| format!("current exe: {e}"))?,
        out_dir: out,
        quiet,
    })
}

fn lab_cmd(cmd: LabCmd) -> Result<(), String> {
    match cmd {
        LabCmd::Run {
            plan,
            out,
            quiet,
            repeat,
        } => {
            let o = lab_options(out, quiet)?;
            if repeat == 0 {
                return Err("--repeat: must be at least 1".into());
            }
            let p = lab::check::check_file(&plan)?;
            lab::run_plan_repeated(&p, &o, repeat)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        LabCmd::Check { plans } => {
            let mut bad = 0;
            for p in &plans {
                match lab::check::check_file(p) {
                    Ok(plan) => println!("{}: ok, {}", p.display(), lab::check::describe(&plan)),
                    Err(e) => {
                        eprintln!("{e}");
                        bad += 1;
                    }
                }
            }
            if bad > 0 {
                return Err(format!("{bad} of {} plan(s) invalid", plans.len()));
            }
            Ok(())
        }
        LabCmd::Compare { a, b, out } => {
            let out = out.unwrap_or_else(lab::compare::default_out);
            let c = lab::compare::compare_and_write(&a, &b, &out).map_err(|e| e.to_string())?;
            print!("{}", c.text());
            println!("results: {}", out.display());
            Ok(())
        }
        LabCmd::Calibrate { out } => {
            let o = lab_options(out, false)?;
            lab::calibrate(&o).map(|_| ()).map_err(|e| e.to_string())
        }
    }
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `config check`: what the file configures, in one line.
fn check(file: &std::path::Path) -> Result<(), String> {
    let cfg = config::load(file).map_err(|e| e.to_string().trim_end().to_string())?;
    let mut parts = vec![
        plural(cfg.ports.len(), "port", "ports"),
        // VLAN 1 exists without being configured: count what the file says.
        format!(
            "{} (and the default VLAN 1)",
            plural(
                cfg.vlans.iter().filter(|v| v.id != 1).count(),
                "VLAN",
                "VLANs"
            )
        ),
        plural(cfg.static_macs.len(), "static MAC", "static MACs"),
    ];
    for (n, one, many) in [
        (
            cfg.l3_interfaces().len(),
            "routed interface",
            "routed interfaces",
        ),
        (cfg.access_lists.len(), "access list", "access lists"),
        (cfg.policy_maps.len(), "policy map", "policy maps"),
        (
            cfg.mirror_sessions.len(),
            "mirror session",
            "mirror sessions",
        ),
        (cfg.backup_pairs.len(), "backup pair", "backup pairs"),
        (cfg.port_channels.len(), "port channel", "port channels"),
    ] {
        if n > 0 {
            parts.push(plural(n, one, many));
        }
    }
    println!("{}: ok: {}", file.display(), parts.join(", "));
    Ok(())
}

/// `lanyard subscribers load FILE|-`: one streamed API request.
fn subscribers_load(
    socket: &std::path::Path,
    file: &std::path::Path,
    skip: bool,
) -> Result<(), String> {
    let mode = if skip { "skip-errors" } else { "atomic" };
    let req = serde_json::json!({"cmd": "subscribers-load", "stream": true, "mode": mode});
    let mut input: Box<dyn std::io::Read> = if file == std::path::Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::fs::File::open(file).map_err(|e| format!("{}: {e}", file.display()))?)
    };
    let v = control::api::request_stream(socket, &req, &mut input)?;
    println!(
        "{} lines: {} added, {} replaced, {} removed, {} errors{} ({} ms)",
        v["lines"],
        v["added"],
        v["replaced"],
        v["removed"],
        v["errors"],
        if v["applied"] == true {
            ""
        } else {
            " (nothing applied)"
        },
        v["ms"]
    );
    for m in v["messages"].as_array().into_iter().flatten() {
        println!("  {}", m.as_str().unwrap_or_default());
    }
    let more = v["errors"]
        .as_u64()
        .unwrap_or(0)
        .saturating_sub(v["messages"].as_array().map_or(0, |a| a.len() as u64));
    if more > 0 {
        println!("  ... {more} more");
    }
    println!("{} subscribers provisioned", v["subscribers"]);
    if v["errors"].as_u64().unwrap_or(0) > 0 {
        return Err("provisioning had errors".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    // `run` keeps the config's `management.socket` unless a socket was
    // given (option or environment), not merely defaulted.
    let top_given = !matches!(
        matches.value_source("socket"),
        None | Some(clap::parser::ValueSource::DefaultValue)
    );
    let top = cli.socket;
    let sock = |o: SocketOpt| o.socket.unwrap_or_else(|| top.clone());
    let r = match cli.cmd {
        Cmd::Run { config, socket } => {
            let serve = socket.or_else(|| top_given.then(|| top.clone()));
            control::daemon::run(&config, serve.as_deref())
        }
        Cmd::Config {
            cmd: ConfigCmd::Check { file },
        } => check(&file),
        Cmd::Config {
            cmd: ConfigCmd::Ldpd { file },
        } => config::load(&file)
            .map(|cfg| print!("{}", config::l2vpn::ldpd_config(&cfg.pseudowires)))
            .map_err(|e| e.to_string()),
        Cmd::Config {
            cmd: ConfigCmd::Diff { file, socket },
        } => absolute(&file).and_then(|f| {
            let v = control::api::request(
                &sock(socket),
                &serde_json::json!({"cmd": "config-diff", "path": f}),
            )?;
            for l in v["changes"].as_array().into_iter().flatten() {
                println!("{}", l.as_str().unwrap_or_default());
            }
            match v["restart_required"].as_array() {
                Some(r) if !r.is_empty() => {
                    println!(
                        "needs restart: {}",
                        r.iter()
                            .filter_map(|x| x.as_str())
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                }
                _ => println!("applies live"),
            }
            Ok(())
        }),
        Cmd::Config {
            cmd: ConfigCmd::Apply { file, socket },
        } => absolute(&file).and_then(|f| {
            let v = control::api::request(
                &sock(socket),
                &serde_json::json!({"cmd": "config-apply", "path": f}),
            )?;
            println!(
                "applied: {} change(s) in {} us",
                v["changes"].as_array().map_or(0, |a| a.len()),
                v["us"].as_u64().unwrap_or(0)
            );
            Ok(())
        }),
        Cmd::Config {
            cmd: ConfigCmd::Rollback { socket },
        } => control::api::request(
            &sock(socket),
            &serde_json::json!({"cmd": "config-rollback"}),
        )
        .map(|v| {
            println!(
                "rolled back: {} change(s)",
                v["changes"].as_array().map_or(0, |a| a.len())
            );
        }),
        Cmd::Restart { socket } => restart(&sock(socket)),
        Cmd::Bypass { state, socket } => {
            let req = match state.as_str() {
                "on" => Ok(serde_json::json!({"cmd": "bypass", "on": true})),
                "off" => Ok(serde_json::json!({"cmd": "bypass", "on": false})),
                "status" => Ok(serde_json::json!({"cmd": "bypass"})),
                s => Err(format!("bypass {s:?}: expected on, off or status")),
            };
            req.and_then(|r| control::api::request(&sock(socket), &r))
                .map(|v| {
                    println!("bypass {}", if v["bypass"] == true { "on" } else { "off" });
                })
        }
        Cmd::Show {
            json,
            socket,
            words,
        } => mgmt::cli::parse_show(&words).and_then(|c| api(&sock(socket), c, json)),
        Cmd::Clear {
            json,
            socket,
            words,
        } => mgmt::cli::parse_clear(&words).and_then(|c| api(&sock(socket), c, json)),
        Cmd::Subscribers {
            cmd:
                SubscribersCmd::Load {
                    file,
                    skip_errors,
                    socket,
                },
        } => subscribers_load(&sock(socket), &file, skip_errors),
        Cmd::Subscribers {
            cmd: SubscribersCmd::ResetUsage { id, socket },
        } => control::api::request(
            &sock(socket),
            &serde_json::json!({"cmd": "subscriber-reset-usage", "id": id}),
        )
        .map(|_| println!("subscriber {id}: usage reset")),
        Cmd::Test {
            cmd:
                TestCmd::CableDiagnostics {
                    port,
                    tdr,
                    from,
                    to,
                    step,
                    pair,
                    json,
                    socket,
                },
        } => api(
            &sock(socket),
            mgmt::cli::Command {
                request: if tdr {
                    serde_json::json!({"cmd": "cable-diagnostics", "port": port, "tdr":
                        {"from_m": from, "to_m": to, "step_m": step, "pair": pair}})
                } else {
                    serde_json::json!({"cmd": "cable-diagnostics", "port": port})
                },
                render: mgmt::show::cable_diagnostics,
                view: "cable_diagnostics".into(),
            },
            json,
        ),
        Cmd::Lab { cmd } => lab_cmd(cmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("lanyard: error: {e}");
            ExitCode::FAILURE
        }
    }
}
