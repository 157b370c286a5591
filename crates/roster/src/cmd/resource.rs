//! `roster resource`: mirrors `flux resource` (flux-core 0.88,
//! `src/cmd/flux-resource.py`) against the Roster service.
//!
//! A Flux administrator can replace `flux` by `roster` and get the same
//! stdout, the same diagnostics (`roster-resource: LEVEL: text` where flux
//! prints `flux-resource: LEVEL: text`) and the same exit codes:
//!
//! * options are parsed like Python's argparse (see [`pycompat::argparse`]); usage
//!   errors print the sub-command's usage and exit 2;
//! * `status`, `drain` (listing), `list`, `info` and `R` fetch
//!   `resource.status`, `resource.sched-status` (falling back to
//!   `sched.resource-status` on ENOSYS) and `job-manager.stats-get`
//!   (housekeeping; errors ignored) and render with the `format` crate;
//! * `drain`, `undrain`, `reload` and `acquire-mute` send one request and
//!   report failures as flux does (`drain` prints `[Errno N] text` and a
//!   hint for EEXIST; the others print the error text);
//! * `eventlog` reads the `resource.journal` stream, sorts the backlog by
//!   time, stops at the end of the backlog unless following or waiting;
//! * `acquire` and `release` are Roster's: the RFC 28 scheduler protocol,
//!   printed as JSON lines, for testing and scripting; `group-set` changes
//!   a resource group's targets at run time.
//!
//! The global options `--uri URI` and `--token-file FILE` (before the
//! sub-command) choose the service; `$ROSTER_URI` is the default. For a
//! `tls://` service `--ca FILE` (`$ROSTER_CA`) names the CA that signed its
//! certificate, `--cert FILE --key FILE` (`$ROSTER_CERT`, `$ROSTER_KEY`)
//! this client's certificate, whose role the service decides.

mod actions;

mod config;
mod eventlog;
mod node;
mod remote;
pub(crate) mod service;
pub(crate) mod sys;
mod views;

use pycompat::argparse::{Arg, Namespace, Parser, Stop};
use resource_views::{CmdOutput, Level, LocalZone};
use service::{Service, SvcError};
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::process::ExitCode;

/// The name diagnostics are prefixed with (flux: `flux-resource`).
pub const PROG: &str = "roster-resource";

/// The program name in usage texts and argparse errors: what a user
/// types (flux prints `flux-resource`, which cannot be typed either).
pub const USAGE_PROG: &str = "roster resource";

const INCLUDE_HELP: &str =
    "Include only specified targets in output set. TARGETS may be provided as an idset or hostlist.";
const QUEUE_HELP: &str = "Include only specified queues in output";
const COLOR_HELP: &str = "Use color; WHEN can be 'never', 'always', or 'auto' (default)";

fn include_arg() -> Arg {
    Arg::opt("include", &["-i", "--include"], INCLUDE_HELP).metavar("TARGETS")
}

fn queue_arg() -> Arg {
    Arg::set_update("queue", &["-q", "--queue"], QUEUE_HELP).metavar("QUEUE,...")
}

fn color_arg() -> Arg {
    Arg::opt("color", &["-L", "--color"], COLOR_HELP)
        .metavar("WHEN")
        .choices(&["never", "always", "auto"])
        .optional_value("always")
        .default_str("auto")
}

fn no_header_arg() -> Arg {
    Arg::flag(
        "no_header",
        &["-n", "--no-header"],
        "Suppress header output",
    )
}

fn from_stdin_arg() -> Arg {
    Arg::flag("from_stdin", &["--from-stdin"], "").hidden()
}

fn config_file_arg() -> Arg {
    Arg::opt("config_file", &["--config-file"], "").hidden()
}

/// `--json` (Roster's), shown in usage and help like every option.
fn json_arg(help: &'static str) -> Arg {
    Arg::flag("json", &["--json"], help)
}

/// `status --at WHEN` (Roster's).
fn at_arg() -> Arg {
    Arg::opt(
        "at",
        &["--at"],
        "Show the status as it was at WHEN (ISO date-time, 03:00 today, --at=-2h), replayed from the journal (Roster)",
    )
    .metavar("WHEN")
}

/// `-f/--force` (a count) and `-u/--update` of `drain` and `undrain`.
fn force_update(p: Parser, force: &'static str, update: &'static str) -> Parser {
    p.arg(Arg::count("force", &["-f", "--force"], force))
        .arg(Arg::flag("update", &["-u", "--update"], update))
}

fn format_arg(help: &'static str) -> Arg {
    Arg::opt("format", &["-o", "--format"], help).default_str("default")
}

/// The command line of `roster resource` (flux-resource.py's parser, plus
/// the global service options and Roster's `acquire`/`release`).
/// `roster manpage` and `roster completions` document it too.
pub fn parser() -> Parser {
    let fmt_help = "Specify output format using Python's string format syntax or a defined format by name (use 'help' to get a list of names)";
    Parser::new(USAGE_PROG)
        .arg(
            Arg::opt(
                "uri",
                &["--uri"],
                "URI of the Roster service, or a comma list of its servers (default: $ROSTER_URI, else the local default instance)",
            )
            .metavar("URI"),
        )
        .arg(
            Arg::opt(
                "token_file",
                &["--token-file"],
                "file holding the bearer token for tcp:// URIs",
            )
            .metavar("FILE"),
        )
        .arg(
            Arg::opt(
                "ca",
                &["--ca"],
                "(tls://) CA certificate that signed the service's (default: $ROSTER_CA)",
            )
            .metavar("FILE"),
        )
        .arg(
            Arg::opt(
                "cert",
                &["--cert"],
                "(tls://) this client's certificate, whose role the service decides (default: $ROSTER_CERT)",
            )
            .metavar("FILE"),
        )
        .arg(
            Arg::opt(
                "key",
                &["--key"],
                "(tls://) the key of --cert (default: $ROSTER_KEY)",
            )
            .metavar("FILE"),
        )
        .subparsers("subcommands", "", "subcommand")
        .sub("acquire-mute", |p| p)
        .sub("drain", |p| {
            force_update(
                p,
                "Force overwrite of existing drain reason. Specify twice to also update drain timestamp.",
                "Update only. Do not return an error if one or more targets are already drained. Do not overwrite any existing drain reason.",
            )
            .arg(include_arg())
            .arg(queue_arg())
            .arg(format_arg(
                "Specify output format using Python's string format syntax or a defined format by name (only used when no drain targets specified)",
            ))
            .arg(no_header_arg())
            .arg(color_arg())
            .arg(json_arg("Print one JSON document instead of the table (Roster; only used when no drain targets specified)",
            ))
            .arg(Arg::pos_optional(
                "targets",
                "List of targets to drain (IDSET or HOSTLIST)",
            ))
            .arg(Arg::remainder("reason", "Reason"))
        })
        .sub("undrain", |p| {
            force_update(
                p,
                "Do not fail if any of the targets are not drained. Specify twice to also update the undrain timestamp.",
                "Do not fail if any of the targets are not drained.",
            )
            .arg(Arg::pos(
                "targets",
                "List of targets to resume (IDSET or HOSTLIST)",
            ))
            .arg(Arg::remainder("reason", "Reason"))
        })
        .sub("status", |p| {
            p.arg(format_arg(fmt_help))
                .arg(
                    Arg::opt("states", &["-s", "--states"], "Output resources in given states")
                        .metavar("STATE,..."),
                )
                .arg(include_arg())
                .arg(queue_arg())
                .arg(no_header_arg())
                .arg(color_arg())
                .arg(from_stdin_arg())
                .arg(config_file_arg())
                .arg(Arg::flag(
                    "skip_empty",
                    &["--skip-empty"],
                    "Skip empty lines of output even with --states",
                ))
                .arg(json_arg("Print one JSON document instead of the table (Roster)"))
                .arg(at_arg())
        })
        .sub("list", |p| {
            p.arg(format_arg(fmt_help))
                .arg(
                    Arg::opt("states", &["-s", "--states"], "Output resources in given states")
                        .metavar("STATE,...")
                        .default_str("free,allocated,down"),
                )
                .arg(include_arg())
                .arg(queue_arg())
                .arg(Arg::flag(
                    "skip_empty",
                    &["--skip-empty"],
                    "Skip empty lines. This is the default with -i, --include.",
                ))
                .arg(Arg::flag(
                    "no_skip_empty",
                    &["--no-skip-empty"],
                    "Do not skip empty lines, even with --include.",
                ))
                .arg(no_header_arg())
                .arg(from_stdin_arg())
                .arg(config_file_arg())
                .arg(json_arg("Print one JSON document instead of the table (Roster)"))
        })
        .sub("info", |p| {
            p.arg(
                Arg::opt(
                    "states",
                    &["-s", "--states"],
                    "Show output only for resources in given states",
                )
                .metavar("STATE,..."),
            )
            .arg(include_arg())
            .arg(queue_arg())
            .arg(from_stdin_arg())
            .arg(config_file_arg())
            .arg(Arg::flag("skip_empty", &["--skip-empty"], "").hidden())
            .arg(Arg::flag("no_skip_empty", &["--no-skip-empty"], "").hidden())
            .arg(json_arg("Print one JSON document instead of the line (Roster)"))
        })
        .sub("reload", |p| {
            p.arg(Arg::pos("path", "path to R or hwloc <rank>.xml dir"))
                .arg(Arg::flag("xml", &["-x", "--xml"], "interpret path as XML dir"))
                .arg(Arg::flag(
                    "force",
                    &["-f", "--force"],
                    "allow resources to contain invalid ranks",
                ))
        })
        .sub("R", |p| {
            p.arg(
                Arg::opt(
                    "states",
                    &["-s", "--states"],
                    "Emit R for resources in given states",
                )
                .metavar("STATE,...")
                .default_str("all"),
            )
            .arg(include_arg())
            .arg(queue_arg())
            .arg(from_stdin_arg())
            .arg(config_file_arg())
        })
        .sub("eventlog", |p| {
            p.arg(
                Arg::opt("format", &["-f", "--format"], "Specify output format: text, json")
                    .metavar("FORMAT")
                    .choices(&["text", "json"])
                    .default_str("text"),
            )
            .arg(json_arg("The same as --format=json (Roster)"))
            .arg(
                Arg::opt(
                    "time_format",
                    &["-T", "--time-format"],
                    "Specify time format: raw, iso, offset, human",
                )
                .metavar("FORMAT")
                .choices(&["raw", "iso", "offset", "human", "reltime"])
                .default_str("raw"),
            )
            .arg(Arg::flag(
                "human",
                &["-H", "--human"],
                "Display human-readable output.",
            ))
            .arg(color_arg())
            .arg(Arg::flag(
                "follow",
                &["-F", "--follow"],
                "Display new events as they are posted",
            ))
            .arg(
                Arg::opt("wait", &["-w", "--wait"], "Display events until EVENT is posted")
                    .metavar("EVENT"),
            )
            .arg(
                Arg::opt(
                    "include",
                    &["-i", "--include"],
                    "Display only events that apply to TARGETS, an RFC 29 hostlist or an RFC 22 idset of ranks",
                )
                .metavar("TARGETS"),
            )
            .arg(
                Arg::append(
                    "match_context",
                    &["-m", "--match-context"],
                    "With --wait, stop only at an event whose context has KEY equal to VAL (may be repeated)",
                )
                .metavar("KEY=VAL"),
            )
            .arg(
                Arg::opt(
                    "timeout",
                    &["-t", "--timeout"],
                    "Fail if the wait is not over after FSD (Flux standard duration)",
                )
                .metavar("FSD"),
            )
        })
        .sub("show", |p| {
            p.arg(Arg::flag("json", &["--json"], "Print one JSON document"))
                .arg(Arg::pos("targets", "Nodes to show (IDSET or HOSTLIST)"))
        })
        .sub("history", |p| {
            p.arg(
                Arg::opt(
                    "since",
                    &["--since"],
                    "Only events at or after WHEN (ISO date-time, 03:00 today, -2h)",
                )
                .metavar("WHEN"),
            )
            .arg(Arg::flag("json", &["--json"], "Print one JSON document"))
            .arg(Arg::pos("targets", "Nodes whose events to show (IDSET or HOSTLIST)"))
        })
        .sub("acquire", |p| {
            p.arg(
                Arg::opt(
                    "group",
                    &["-g", "--group"],
                    "Acquire resource group GROUP (RFC 28 groups draft)",
                )
                .metavar("GROUP"),
            )
        })
        .sub("release", |p| {
            p.arg(Arg::pos("group", "Resource group named in the acquire request"))
                .arg(Arg::pos("targets", "Execution targets to release (IDSET)"))
        })
        .sub("group-set", |p| {
            p.arg(Arg::pos("group", "Resource group to set"))
                .arg(Arg::pos(
                    "targets",
                    "Execution targets of the group (IDSET or HOSTLIST; \"\" empties it)",
                ))
        })
}

/// Everything a sub-command needs from the process.
pub struct Ctx<'a> {
    /// Standard output (buffered; sub-commands flush where flux would).
    pub out: &'a mut dyn Write,
    /// Standard error.
    pub err: &'a mut dyn Write,
    /// Environment lookups.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Standard input (`--from-stdin`).
    pub stdin: &'a mut dyn Read,
    /// Whether stdout is a terminal (`-L auto`).
    pub stdout_tty: bool,
    /// Terminal columns for usage and help text.
    pub columns: usize,
    /// The local time zone.
    pub zone: &'a dyn LocalZone,
    /// The current directory (`reload` sends an absolute path).
    pub cwd: String,
    /// The current time, seconds since the epoch (events without one).
    pub now: &'a dyn Fn() -> f64,
}

/// What to do about an error flux has no advice for.
fn error_hint(text: &str) -> Option<&'static str> {
    if !text.starts_with("cannot connect to ") {
        return None;
    }
    Some(if text.starts_with("cannot connect to tcp://") {
        "is `roster serve` listening there? TCP needs --token-file (or ROSTER_TOKEN_FILE) with the service's token"
    } else if text.starts_with("cannot connect to tls://") {
        "is `roster serve` listening there? TLS needs --ca (ROSTER_CA) to check the service, and --cert/--key (ROSTER_CERT/ROSTER_KEY) or --token-file for your role"
    } else {
        "is a service running? Start one with `roster serve &`, or point --uri / ROSTER_URI at it"
    })
}

impl Ctx<'_> {
    /// Log a diagnostic as flux's CLIMain logger does.
    pub fn log(&mut self, level: Level, text: &str) {
        let _ = writeln!(self.err, "{PROG}: {}: {text}", level.name());
        // After flux's ERROR line (kept byte-identical), a hint of our own.
        if matches!(level, Level::Error) {
            if let Some(hint) = error_hint(text) {
                let _ = writeln!(self.err, "{PROG}: {}: {hint}", Level::Info.name());
            }
        }
    }

    /// `LOGGER.error(text)`, exit status 1.
    pub fn fail(&mut self, text: &str) -> i32 {
        self.log(Level::Error, text);
        1
    }

    /// An uncaught RPC exception (`CLIMain`: strerror, exit 1).
    pub fn rpc_fail(&mut self, e: &SvcError) -> i32 {
        self.fail(&e.message())
    }

    /// `Ok` as is; an error logged as [`Ctx::fail`], its exit status as `Err`.
    pub fn check<T, E: std::fmt::Display>(&mut self, r: Result<T, E>) -> Result<T, i32> {
        r.map_err(|e| self.fail(&e.to_string()))
    }

    /// `Ok` as is; an RPC error logged as [`Ctx::rpc_fail`], its exit
    /// status as `Err`.
    pub fn rpc_check<T>(&mut self, r: Result<T, SvcError>) -> Result<T, i32> {
        r.map_err(|e| self.rpc_fail(&e))
    }

    /// Print a view's output and return its exit status.
    pub fn emit(&mut self, o: &CmdOutput) -> i32 {
        let _ = self.out.write_all(o.stdout.as_bytes());
        let _ = self.out.flush();
        let _ = self.err.write_all(o.stderr_text(PROG).as_bytes());
        o.exit_code
    }

    /// Resolve `-L WHEN`.
    pub fn color(&self, when: Option<&str>) -> bool {
        match when {
            Some("always") => true,
            Some("never") => false,
            _ => self.stdout_tty,
        }
    }
}

/// The sub-command a mistyped one was probably meant to be, from
/// argparse's `argument subcommand: invalid choice: 'X' (choose from
/// 'a', 'b', ...)` error.
fn subcommand_guess(error: &str) -> Option<String> {
    let rest = error
        .split("argument subcommand: invalid choice: ")
        .nth(1)?;
    let (word, choices) = rest.split_once(" (choose from ")?;
    let word = word.trim_matches('\'');
    let choices: Vec<&str> = choices
        .trim_end()
        .trim_end_matches(')')
        .split(", ")
        .map(|c| c.trim_matches('\''))
        .collect();
    crate::cmd::suggest::closest(word, choices)
}

/// Parse and run one command line (`words` excludes the program name).
/// Returns the exit status.
pub fn run(
    words: &[String],
    ctx: &mut Ctx<'_>,
    svc: &mut dyn FnMut(&Namespace) -> Box<dyn Service>,
) -> i32 {
    let p = parser();
    let ns = match p.parse(words, ctx.columns) {
        Ok(ns) => ns,
        Err(Stop::Help(text)) => {
            let _ = ctx.out.write_all(text.as_bytes());
            let _ = ctx.out.flush();
            return 0;
        }
        Err(Stop::Error(text)) => {
            let _ = ctx.err.write_all(text.as_bytes());
            if let Some(guess) = subcommand_guess(&text) {
                ctx.log(Level::Info, &format!("did you mean '{guess}'?"));
            }
            return 2;
        }
    };
    let mut service = svc(&ns);
    let s = service.as_mut();
    // A command's `Err` is the exit status of a failure it has reported.
    let code = match ns.str("subcommand").unwrap_or("") {
        "status" => views::status(&ns, ctx, s),
        "drain" if ns.str("targets").is_none() => views::drain_list(&ns, ctx, s),
        "drain" => actions::drain(&ns, ctx, s),
        "undrain" => actions::undrain(&ns, ctx, s),
        "list" => views::list(&ns, ctx, s, resource_views::ListView::List),
        "info" => views::list(&ns, ctx, s, resource_views::ListView::Info),
        "R" => views::list(&ns, ctx, s, resource_views::ListView::R),
        "reload" => actions::reload(&ns, ctx, s),
        "acquire-mute" => actions::acquire_mute(ctx, s),
        "acquire" => actions::acquire(&ns, ctx, s),
        "release" => actions::release(&ns, ctx, s),
        "group-set" => actions::group_set(&ns, ctx, s),
        "eventlog" => eventlog::eventlog(&ns, ctx, s),
        "show" => node::show(&ns, ctx, s),
        "history" => node::history(&ns, ctx, s),
        _ => Err(2),
    };
    let _ = ctx.out.flush();
    code.unwrap_or_else(|code| code)
}

/// Entry point: `args[0]` is the program name.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let (words, columns) = super::words_and_columns(&args);
    let env = |k: &str| std::env::var(k).ok();
    let zone = sys::SystemZone::new();
    let stdout = std::io::stdout();
    let stdout_tty = stdout.is_terminal();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = std::io::stderr().lock();
    let mut stdin = std::io::stdin().lock();
    let cwd = std::env::current_dir()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "/".into());
    let now = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    };
    let mut ctx = Ctx {
        out: &mut out,
        err: &mut err,
        env: &env,
        stdin: &mut stdin,
        stdout_tty,
        columns,
        zone: &zone,
        cwd,
        now: &now,
    };
    let mut make = |ns: &Namespace| -> Box<dyn Service> {
        let path = |dest: &str| ns.str(dest).map(std::path::PathBuf::from);
        Box::new(
            remote::Remote::new(ns.str("uri").map(String::from), path("token_file")).with_tls(
                client::TlsFiles {
                    ca: path("ca"),
                    cert: path("cert"),
                    key: path("key"),
                },
            ),
        )
    };
    let code = run(&words, &mut ctx, &mut make);
    let _ = out.flush();
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

#[cfg(test)]
mod tests;
