//! Stand-alone runner (the `lanyard lab` CLI does the same):
//! `lab run PLAN [--out DIR] [--lanyard BIN] [--quiet]` or `lab calibrate`.

use std::path::PathBuf;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = lab::LabOptions {
        lanyard_bin: PathBuf::from("target/release/lanyard"),
        out_dir: None,
        quiet: false,
    };
    let mut pos = Vec::new();
    let mut i = 0;
    while i < args.len() {
        match args[i].as_str() {
            "--out" if i + 1 < args.len() => {
                opts.out_dir = Some(PathBuf::from(&args[i + 1]));
                i += 1;
            }
            "--lanyard" if i + 1 < args.len() => {
                opts.lanyard_bin = PathBuf::from(&args[i + 1]);
                i += 1;
            }
            "--quiet" => opts.quiet = true,
            a => pos.push(a.to_string()),
        }
        i += 1;
    }
    let r = match pos.first().map(|s| s.as_str()) {
        Some("run") if pos.len() == 2 => {
            lab::run_plan_file(std::path::Path::new(&pos[1]), &opts).map(|_| ())
        }
        Some("calibrate") => lab::calibrate(&opts).map(|_| ()),
        _ => {
            eprintln!("usage: lab run PLAN [--out DIR] [--lanyard BIN] [--quiet] | lab calibrate");
            std::process::exit(2);
        }
    };
    if let Err(e) = r {
        eprintln!("lab: {e}");
        std::process::exit(1);
    }
}
