//! Subcommands. Each exposes `main(args) -> ExitCode` where `args[0]` is the program name.

pub mod agent;
pub mod docs;
pub mod graph;
pub mod hostlist;
pub mod idset;
pub mod r;
pub mod resource;
pub mod serve;
pub mod suggest;

use std::ffi::OsString;
use std::process::ExitCode;

/// What clap parsed, or its message (`--help`, a usage error) printed
/// and the exit status: 0 after help, 2 for a usage error.
pub fn clap_or_exit<T>(parsed: Result<T, clap::Error>) -> Result<T, ExitCode> {
    parsed.map_err(|e| {
        let _ = e.print();
        ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2))
    })
}

/// [`clap_or_exit`] for `args` parsed as the command `name` (e.g. `roster
/// agent`; no -V: only `roster` itself takes it).
pub fn parse_as<T: clap::Parser>(name: &'static str, args: Vec<OsString>) -> Result<T, ExitCode> {
    let cmd = T::command().name(name).bin_name(name);
    let matches = cmd.disable_version_flag(true).try_get_matches_from(args);
    clap_or_exit(matches.and_then(|mut m| T::from_arg_matches_mut(&mut m)))
}

/// The words after the program name, and the width for help text
/// (`$COLUMNS`, else the terminal's).
pub fn words_and_columns(args: &[OsString]) -> (Vec<String>, usize) {
    let words = args.iter().skip(1);
    let words = words.map(|a| a.to_string_lossy().into_owned()).collect();
    let columns = pycompat::argparse::terminal_columns(
        std::env::var("COLUMNS").ok().as_deref(),
        resource::sys::stdout_columns(),
    );
    (words, columns)
}
