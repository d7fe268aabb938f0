//! `lanyard`: the switch and its test bed, one binary. Glue only: every
//! command is parsed here and carried out by a library crate.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "lanyard",
    version,
    about = "A software multilayer switch/router for Linux, and its test bed"
)]
struct Cli {
    /// Management socket of the switch to talk to; for `run`, the socket
    /// to serve (overrides the config's `management.socket`; precedence:
    /// --socket, then LANYARD_SOCKET, then the config, then the default).
    #[arg(
        long,
        global = true,
        env = "LANYARD_SOCKET",
        default_value = "/run/lanyard/lanyard.sock"
    )]
    socket: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the switch in the foreground (logs to stderr; SIGINT/SIGTERM stop it).
    Run {
        #[arg(long, short)]
        config: PathBuf,
    },
    /// Configuration tools.
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
    /// Show state: interfaces | vlan | mac address-table [vlan N] [count] | counters | version
    Show {
        /// Print the API's JSON instead of a table.
        #[arg(long)]
        json: bool,
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
    /// Clear state: mac address-table [vlan N]
    Clear {
        #[arg(long)]
        json: bool,
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
    },
    /// Restart the data plane in place (same PID; e.g. after an upgrade):
    /// learned addresses are kept; prints nothing until the switch is back.
    Restart,
    /// Bypass (wire) mode: forward without services (ACLs, QoS, flows).
    Bypass {
        /// on | off | status
        state: String,
    },
    /// The test bed: run plans against Lanyard and peer switches.
    Lab {
        #[command(subcommand)]
        cmd: LabCmd,
    },
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// Validate a configuration file; every error names file, line and field.
    Check { file: PathBuf },
    /// What applying FILE to the running switch would change.
    Diff { file: PathBuf },
    /// Apply FILE to the running switch without interrupting traffic
    /// (atomic: nothing changes if any part fails).
    Apply { file: PathBuf },
    /// Go back to the configuration before the last apply.
    Rollback,
}

#[derive(Subcommand)]
enum LabCmd {
    /// Run a plan (YAML) and print the comparison tables.
    Run {
        plan: PathBuf,
        /// Where to write JSON, CSV and SVG results (default lab-results/<time>/).
        #[arg(long)]
        out: Option<PathBuf>,
        #[arg(long, short)]
        quiet: bool,
    },
    /// Measure the test bed's ceiling (and trafgen's rate, if installed).
    Calibrate {
        #[arg(long)]
        out: Option<PathBuf>,
    },
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

fn api(socket: &std::path::Path, cmd: control::cli::Command, json: bool) -> Result<(), String> {
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
        LabCmd::Run { plan, out, quiet } => {
            let o = lab_options(out, quiet)?;
            lab::run_plan_file(&plan, &o)
                .map(|_| ())
                .map_err(|e| e.to_string())
        }
        LabCmd::Calibrate { out } => {
            let o = lab_options(out, false)?;
            lab::calibrate(&o).map(|_| ()).map_err(|e| e.to_string())
        }
    }
}

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    // `run` keeps the config's `management.socket` unless a socket was
    // given (option or environment), not merely defaulted.
    let socket_given = !matches!(
        matches.value_source("socket"),
        None | Some(clap::parser::ValueSource::DefaultValue)
    );
    let r = match cli.cmd {
        Cmd::Run { config } => {
            control::daemon::run(&config, socket_given.then_some(cli.socket.as_path()))
        }
        Cmd::Config {
            cmd: ConfigCmd::Check { file },
        } => match control::config::load(&file) {
            Ok(cfg) => {
                println!(
                    "{}: ok ({} ports, {} vlans, {} static macs)",
                    file.display(),
                    cfg.ports.len(),
                    cfg.vlan_ids().len(),
                    cfg.static_macs.len()
                );
                Ok(())
            }
            Err(e) => Err(e.to_string().trim_end().to_string()),
        },
        Cmd::Config {
            cmd: ConfigCmd::Diff { file },
        } => absolute(&file).and_then(|f| {
            let v = control::api::request(
                &cli.socket,
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
            cmd: ConfigCmd::Apply { file },
        } => absolute(&file).and_then(|f| {
            let v = control::api::request(
                &cli.socket,
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
            cmd: ConfigCmd::Rollback,
        } => control::api::request(&cli.socket, &serde_json::json!({"cmd": "config-rollback"}))
            .map(|v| {
                println!(
                    "rolled back: {} change(s)",
                    v["changes"].as_array().map_or(0, |a| a.len())
                );
            }),
        Cmd::Restart => restart(&cli.socket),
        Cmd::Bypass { state } => {
            let req = match state.as_str() {
                "on" => Ok(serde_json::json!({"cmd": "bypass", "on": true})),
                "off" => Ok(serde_json::json!({"cmd": "bypass", "on": false})),
                "status" => Ok(serde_json::json!({"cmd": "bypass"})),
                s => Err(format!("bypass {s:?}: expected on, off or status")),
            };
            req.and_then(|r| control::api::request(&cli.socket, &r))
                .map(|v| {
                    println!("bypass {}", if v["bypass"] == true { "on" } else { "off" });
                })
        }
        Cmd::Show { json, words } => {
            control::cli::parse_show(&words).and_then(|c| api(&cli.socket, c, json))
        }
        Cmd::Clear { json, words } => {
            control::cli::parse_clear(&words).and_then(|c| api(&cli.socket, c, json))
        }
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
