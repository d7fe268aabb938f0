//! `lanyard`: the switch and its test bed, one binary. Glue only: every
//! command is parsed here and carried out by a library crate.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "lanyard",
    version,
    about = "A software multilayer switch/router for Linux, and its test bed"
)]
struct Cli {
    /// Management socket of the switch to talk to.
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
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Run { config } => control::daemon::run(&config),
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
