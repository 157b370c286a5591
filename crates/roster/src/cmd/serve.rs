//! `roster serve`: run the resource service.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use rpc::uri::Uri;

/// Run the Roster resource service.
///
/// With no configuration it serves this machine (discovered from /sys) with
/// its state under the user's state directory and its socket under the
/// runtime directory. Stop it with SIGTERM or SIGINT: streams end cleanly
/// and the drain checkpoint is written.
#[derive(Debug, Parser)]
#[command(
    name = "roster serve",
    bin_name = "roster serve",
    disable_version_flag = true
)]
struct Args {
    /// TOML configuration file, or a directory of *.toml files.
    #[arg(short = 'c', long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Check the configuration (and build its R), print a summary, exit.
    #[arg(long)]
    check: bool,
    /// State directory (resource.R, resource.eventlog, checkpoint).
    #[arg(long, value_name = "DIR")]
    statedir: Option<PathBuf>,
    /// Listen on URI: unix:///PATH, tcp://HOST:PORT or flux:///PATH (repeatable).
    #[arg(long, value_name = "URI", value_parser = parse_uri)]
    listen: Vec<Uri>,
    /// Consider every target online from the start.
    #[arg(long)]
    monitor_force_up: bool,
    /// R of the enclosing allocation (inventory method job-info).
    #[arg(long = "parent-R", value_name = "FILE")]
    parent_r: Option<PathBuf>,
    /// Bearer token file required of TCP clients.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// Log debug messages too (RUST_LOG, e.g. `info,serve=debug`, overrides).
    #[arg(short, long)]
    verbose: bool,
    /// Log lines as text or as JSON objects.
    #[arg(long, value_name = "FORMAT", value_enum, default_value_t)]
    log_format: crate::logging::LogFormat,
}

fn parse_uri(s: &str) -> Result<Uri, String> {
    Uri::parse(s).map_err(|e| e.to_string())
}

/// The command line, for `roster completions` and `roster manpage`.
pub fn command() -> clap::Command {
    <Args as clap::CommandFactory>::command()
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    crate::logging::init(args.verbose, args.log_format);
    let opts = serve::Options {
        config: args.config,
        statedir: args.statedir,
        listen: args.listen,
        monitor_force_up: args.monitor_force_up,
        parent_r: args.parent_r,
        token_file: args.token_file,
    };
    if args.check {
        return match serve::check(&opts) {
            Ok(summary) => {
                println!("{summary}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("roster serve: {e}");
                ExitCode::from(1)
            }
        };
    }
    // One socket per agent session: allow as many as the hard limit does.
    agent::raise_nofile_limit();
    let control = Arc::new(serve::Control::default());
    match serve::run(&opts, control, |_| {}) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roster serve: {e}");
            ExitCode::from(1)
        }
    }
}
