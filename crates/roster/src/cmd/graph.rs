//! `roster graph`: query and schedule on an RFC 4 resource graph, in the
//! spirit of Fluxion's `resource-query`.
//!
//! The graph is loaded once (`--load FILE`: an RFC 20 R, a JSON Graph
//! Format document or an hwloc XML topology, detected from the content;
//! or `--local` for this machine), then commands are run one per line,
//! from `-c CMD` options, else from the words after the options (one
//! command), else from standard input.  See [`session`] for the command
//! set and output formats.
//!
//! Exit status: 0 when every command succeeded, 1 when the graph could not
//! be loaded or any command failed (the failure is reported and the
//! following commands still run, as in resource-query), 2 for a usage
//! error.  A match that finds no resources is an answer, not a failure.

use std::ffi::OsString;
use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use model::hwloc::HwlocOptions;
use model::Graph;

mod follow;
mod follower;
mod session;

pub use session::{Format, Outcome, Session};

/// How to read the `--load` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadFormat {
    /// Detect: XML is hwloc; JSON with a `graph` key is JGF; any other JSON
    /// is R (whose `scheduling` JGF is used when present).
    Auto,
    /// JSON Graph Format (as Fluxion writes it, or roster's full form).
    Jgf,
    /// RFC 20 R, using its `scheduling` JGF when present.
    Rv1,
    /// RFC 20 R from its `execution` key only (Fluxion's rv1exec reader).
    Rv1exec,
    /// An hwloc XML topology (one node).
    Hwloc,
}

#[derive(Debug, Parser)]
#[command(
    name = "roster graph",
    about = "Query and schedule on an RFC 4 resource graph (like Fluxion's resource-query)",
    after_help = session::commands_help()
)]
struct Opts {
    /// Resources to load: an R, a JGF or an hwloc XML file.
    #[arg(short = 'L', long = "load", value_name = "FILE")]
    load: Option<String>,
    /// Format of the --load file.
    #[arg(short = 'f', long = "load-format", value_enum, default_value = "auto")]
    load_format: LoadFormat,
    /// Load this machine (its cores and GPUs) instead of a file.
    #[arg(long, conflicts_with = "load")]
    local: bool,
    /// Build the graph from the resource.acquire stream of the service at
    /// URI and keep it live (see "A scheduler's view" in the README).
    #[arg(long, value_name = "URI", conflicts_with_all = ["load", "local"])]
    follow: Option<String>,
    /// With --follow: acquire this group (RFC 28 groups variant) instead
    /// of the v1 protocol.
    #[arg(long, value_name = "GROUP", requires = "follow")]
    group: Option<String>,
    /// Rank of the node read from hwloc XML or --local.
    #[arg(long, default_value_t = 0)]
    rank: u32,
    /// Output of match, find and copy: R without (rv1_nosched) or with
    /// (rv1) its scheduling JGF, or the JGF alone (jgf).
    #[arg(
        short = 'F',
        long = "format",
        value_enum,
        default_value = "rv1_nosched"
    )]
    format: Format,
    /// Same as --format=rv1: allocations carry their `scheduling` JGF.
    #[arg(short = 'S', long = "scheduling", conflicts_with = "format")]
    scheduling: bool,
    /// Print one JSON object per command instead of text.
    #[arg(long)]
    json: bool,
    /// Run CMD (may be repeated); without it, the trailing words form one
    /// command, and without those commands are read from standard input.
    #[arg(short = 'c', long = "command", value_name = "CMD")]
    commands: Vec<String>,
    /// One command, e.g. `find status=down`.
    #[arg(trailing_var_arg = true, value_name = "COMMAND")]
    words: Vec<String>,
}

impl Opts {
    /// A session on `g` with the output and load options given.
    fn session(&self, g: Graph) -> Session {
        let format = if self.scheduling {
            Format::Rv1
        } else {
            self.format
        };
        let mut s = Session::new(g, format, self.json);
        s.set_load_options(self.load_format, i64::from(self.rank));
        s
    }

    /// The `-c` commands, then the trailing words as one more.
    fn commands(&self) -> Vec<String> {
        let mut cmds = self.commands.clone();
        if !self.words.is_empty() {
            cmds.push(self.words.join(" "));
        }
        cmds
    }
}

/// The command line, for `roster completions` and `roster manpage`.
pub fn command() -> clap::Command {
    <Opts as clap::CommandFactory>::command()
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    let mut argv = args;
    if let Some(first) = argv.first_mut() {
        *first = OsString::from("roster graph");
    }
    let opts = match super::clap_or_exit(Opts::try_parse_from(argv)) {
        Ok(o) => o,
        Err(code) => return code,
    };
    if let Some(uri) = opts.follow.as_deref() {
        let c = match client::Client::from_env(Some(uri), None) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("roster graph: {e}");
                return ExitCode::from(2);
            }
        };
        let mut s = opts.session(Graph::new());
        s.follow(opts.group.as_deref());
        return follow::run(s, c, opts.group.as_deref(), opts.commands(), opts.json);
    }
    let g = match load(&opts) {
        Ok(g) => g,
        Err(msg) => {
            eprintln!("roster graph: {msg}");
            return ExitCode::from(1);
        }
    };
    let mut s = opts.session(g);
    let stdout = std::io::stdout();
    let stderr = std::io::stderr();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut err = stderr.lock();
    let mut failed = false;
    let mut run = |line: &str, out: &mut dyn Write, err: &mut dyn Write| -> bool {
        match s.run_line(line, out, err) {
            Outcome::Ok => true,
            Outcome::Failed => {
                failed = true;
                true
            }
            Outcome::Quit => false,
        }
    };
    let cmds = opts.commands();
    if !cmds.is_empty() {
        for c in &cmds {
            let more = run(c, &mut out, &mut err);
            let _ = out.flush();
            if !more {
                break;
            }
        }
    } else {
        let stdin = std::io::stdin();
        let interactive = stdin.is_terminal();
        let mut input = stdin.lock();
        let mut line = String::new();
        loop {
            if interactive {
                let _ = write!(err, "roster-graph> ");
                let _ = err.flush();
            }
            line.clear();
            match input.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    let _ = writeln!(err, "roster graph: reading standard input: {e}");
                    failed = true;
                    break;
                }
            }
            let more = run(&line, &mut out, &mut err);
            // Keep the output in step with the input when used as a REPL.
            if interactive {
                let _ = out.flush();
            }
            if !more {
                break;
            }
        }
    }
    if let Err(e) = out.flush() {
        let _ = writeln!(err, "roster graph: writing output: {e}");
        return ExitCode::from(1);
    }
    follow::exit(failed)
}

fn load(opts: &Opts) -> Result<Graph, String> {
    let hw = HwlocOptions {
        rank: i64::from(opts.rank),
        hostname: Some(local_hostname()),
        sockets: true,
    };
    if opts.local {
        let t = topo::discover_local().map_err(|e| format!("discovering this machine: {e}"))?;
        return Graph::from_topology(&t, &hw).map_err(|e| e.to_string());
    }
    let Some(path) = opts.load.as_deref() else {
        return Err("nothing to load: give --load FILE or --local".into());
    };
    load_file(path, opts.load_format, &hw)
}

/// Read a graph from a file (see [`LoadFormat`]).  Errors name the file.
pub(crate) fn load_file(path: &str, fmt: LoadFormat, hw: &HwlocOptions) -> Result<Graph, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let wrap = |e: model::ModelError| format!("{path}: {e}");
    let fmt = match fmt {
        LoadFormat::Auto => {
            let t = text.trim_start();
            if t.starts_with('<') {
                LoadFormat::Hwloc
            } else {
                let v: serde_json::Value = serde_json::from_str(&text)
                    .map_err(|e| format!("{path}: not JSON (R or JGF) nor XML (hwloc): {e}"))?;
                if v.get("graph").is_some() {
                    return Graph::from_jgf(&v).map_err(wrap);
                }
                LoadFormat::Rv1
            }
        }
        f => f,
    };
    match fmt {
        LoadFormat::Hwloc => Graph::from_hwloc_xml(&text, hw).map_err(wrap),
        LoadFormat::Jgf => Graph::from_jgf_str(&text).map_err(wrap),
        LoadFormat::Rv1 | LoadFormat::Auto => Graph::from_r_str(&text, true).map_err(wrap),
        LoadFormat::Rv1exec => Graph::from_r_str(&text, false).map_err(wrap),
    }
}

pub(crate) use topo::local_hostname;
