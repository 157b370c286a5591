//! `roster`: one binary, many subcommands.
//!
//! Each subcommand owns its argument parsing (they mirror different flux
//! tools with different conventions), so dispatch here is by the first word.

use std::ffi::OsString;
use std::process::ExitCode;

mod cmd;
mod logging;

const USAGE: &str = "\
Usage: roster COMMAND [ARGS...]

Offline tools (mirror flux's):
  idset     normalize|expand|count|union|intersect|diff|xor  RFC 22 idsets
  hostlist  [OPTIONS] [HOSTLIST...]                           RFC 29 hostlists (flux hostlist)
  R         encode|decode|append|diff|intersect|remap|rerank|verify|set-property|parse-config
                                                             RFC 20 resource sets (flux R)
  graph     [-L FILE] [OPTIONS] [COMMAND...]                 RFC 4 resource graph queries and matching
            --follow URI [--group G]                         (like Fluxion's resource-query), fed live
                                                             by RFC 28 acquire when --follow is given

Service:
  serve     [--config FILE] [--statedir DIR] [--listen URI]...  run the resource service
  agent     [--uri URI] [--token-file FILE] | --simulate HOSTLIST ...
                                                             the node agent (liveness, verification)

Service clients (mirror flux's):
  resource  status|list|info|R|drain|undrain|reload|eventlog|acquire|release|group-set
                                                             the resource service (flux resource)

Documentation:
  completions bash|zsh|fish|elvish|powershell                 print a shell completion script
  manpage   [--dir DIR] [COMMAND...]                          print (or write) the man pages

Run 'roster COMMAND --help' for a command's options.
";

/// The sub-commands, for "did you mean".
const COMMANDS: [&str; 9] = [
    "idset",
    "hostlist",
    "R",
    "graph",
    "serve",
    "agent",
    "resource",
    "completions",
    "manpage",
];

fn main() -> ExitCode {
    let mut args: Vec<OsString> = std::env::args_os().collect();
    if args.len() < 2 {
        eprint!("{USAGE}");
        return ExitCode::from(2);
    }
    let sub = args.remove(1);
    // args[0] stays the program name so sub-parsers print "roster" in usage.
    if matches!(
        sub.to_str(),
        Some("idset" | "hostlist" | "R" | "completions" | "manpage")
    ) {
        default_sigpipe();
    }
    match sub.to_str() {
        Some("idset") => cmd::idset::main(args),
        Some("hostlist") => cmd::hostlist::main(args),
        Some("R") => cmd::r::main(args),
        Some("graph") => cmd::graph::main(args),
        Some("resource") => cmd::resource::main(args),
        Some("serve") => cmd::serve::main(args),
        Some("agent") => cmd::agent::main(args),
        Some("completions") => cmd::docs::completions_main(args),
        Some("manpage") => cmd::docs::manpage_main(args),
        Some("-h" | "--help" | "help") => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some("-V" | "--version" | "version") => {
            println!("roster {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        _ => {
            let word = sub.to_string_lossy();
            eprintln!("roster: unknown command '{word}'");
            if let Some(guess) = cmd::suggest::closest(&word, COMMANDS.iter().copied()) {
                eprintln!("roster: did you mean '{guess}'?");
            }
            eprint!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// The offline tools (they write only to stdout and files) end quietly,
/// killed by SIGPIPE, when their reader goes away (`roster hostlist -e
/// ... | head`), as flux's tools do.  Rust ignores SIGPIPE, which would
/// make every write after that an EPIPE error to report.  Not for the
/// commands that talk to sockets.
fn default_sigpipe() {
    #[allow(unsafe_code)]
    // SAFETY: signal(2) installs the default action; no Rust handler is
    // involved and no thread has started yet.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}
