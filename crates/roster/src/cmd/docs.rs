//! `roster completions SHELL` and `roster manpage`: shell completions and
//! man pages generated from the command lines themselves.
//!
//! The sub-commands parse their arguments three ways (clap for `serve`,
//! `agent` and `graph`; Python argparse emulation for `resource` and
//! `hostlist`; flux's liboptparse emulation for `R`), so the whole tree
//! is first described as one `clap::Command` (the argparse and getopt
//! tables converted, option for option), which `clap_complete` and
//! `clap_mangen` then render.  Nothing here parses a real command line.

use clap::{Arg, ArgAction, Command};
use clap_complete::Shell;
use pycompat::argparse::{self, Action, Nargs};
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// What each `roster resource` sub-command does (argparse has no help
/// for them: flux registers its sub-parsers without one).
const RESOURCE_ABOUT: [(&str, &str); 14] = [
    ("acquire-mute", "Stop resource.acquire responses (testing)"),
    (
        "drain",
        "Drain nodes, or list the drained nodes when no targets are given",
    ),
    ("undrain", "Undrain nodes"),
    ("status", "Show the resource status of each node"),
    (
        "list",
        "List resources by scheduler state (free, allocated, down)",
    ),
    ("info", "Show a short summary of resources"),
    ("reload", "Reload R (or hwloc XML) from a path"),
    ("R", "Emit the R of resources in given states"),
    ("eventlog", "Show the resource eventlog (RFC 44 events)"),
    (
        "show",
        "Show one node: state, drain and who drained it, liveness, R (Roster)",
    ),
    (
        "history",
        "Show each node's events: drains with their requester, liveness (Roster)",
    ),
    (
        "acquire",
        "Follow resource.acquire as a scheduler does (RFC 28), as JSON lines",
    ),
    (
        "release",
        "Release execution targets of a resource group (RFC 28 groups)",
    ),
    ("group-set", "Set a resource group's execution targets"),
];

/// Every command of `roster`, with its options.
pub fn command() -> Command {
    let mut cmd = tree();
    for (name, about) in RESOURCE_ABOUT {
        cmd = cmd.mut_subcommand("resource", |r| r.mut_subcommand(name, |c| c.about(about)));
    }
    finish(cmd)
}

/// No `help` sub-commands (they would get pages of their own), and the
/// version on every page.
fn finish(cmd: Command) -> Command {
    let subs: Vec<String> = cmd
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect();
    let mut cmd = cmd
        .disable_help_subcommand(true)
        .version(env!("CARGO_PKG_VERSION"));
    for s in subs {
        // only `roster` itself takes -V
        cmd = cmd.mut_subcommand(s, |c| finish(c).disable_version_flag(true));
    }
    cmd
}

fn tree() -> Command {
    Command::new("roster")
        .bin_name("roster")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Roster: a Rust implementation of the Flux resource service")
        .long_about(
            "Roster: a Rust implementation of the Flux resource service.  One binary: \
             offline tools for RFC 22 idsets, RFC 29 hostlists, RFC 20 R and RFC 4 graphs, \
             the resource service (serve), its node agent (agent), and the client \
             (resource) that mirrors flux resource.",
        )
        .subcommand_required(true)
        .subcommand(idset())
        .subcommand(from_argparse(
            "hostlist",
            "RFC 29 hostlists (flux hostlist)",
            &super::hostlist::parser(),
        ))
        .subcommand(r())
        .subcommand(
            rename(super::graph::command(), "graph")
                .about("RFC 4 resource graph queries and matching (like Fluxion's resource-query)"),
        )
        .subcommand(rename(super::serve::command(), "serve").about("Run the resource service"))
        .subcommand(
            rename(super::agent::command(), "agent")
                .about("The node agent (liveness, verification)"),
        )
        .subcommand(from_argparse(
            "resource",
            "The resource service's client (flux resource)",
            &super::resource::parser(),
        ))
        .subcommand(
            Command::new("completions")
                .about("Print a shell completion script")
                .long_about(
                    "Print a completion script for SHELL on standard output, e.g. \
                     `roster completions bash > /etc/bash_completion.d/roster`.",
                )
                .arg(
                    Arg::new("shell")
                        .required(true)
                        .value_parser(clap::value_parser!(Shell))
                        .help("bash, zsh, fish, elvish or powershell"),
                ),
        )
        .subcommand(
            Command::new("manpage")
                .about("Print or write the man pages")
                .long_about(
                    "Without --dir, print the roff man page of roster (or of the command \
                     named, e.g. `roster manpage resource drain`) on standard output; with \
                     --dir DIR, write roster.1 and one page per command (roster-resource-drain.1, \
                     ...) into DIR.",
                )
                .arg(
                    Arg::new("dir")
                        .long("dir")
                        .value_name("DIR")
                        .value_hint(clap::ValueHint::DirPath)
                        .help("Write every page into DIR"),
                )
                .arg(
                    Arg::new("command")
                        .num_args(0..)
                        .value_name("COMMAND")
                        .help("The command whose page to print"),
                ),
        )
}

fn rename(cmd: Command, name: &'static str) -> Command {
    cmd.name(name).bin_name(format!("roster {name}"))
}

/// `roster idset`: sub-commands taking idsets.
fn idset() -> Command {
    let mut cmd = Command::new("idset")
        .about("RFC 22 idset arithmetic")
        .subcommand_required(true);
    for (name, about) in super::idset::SUBCOMMANDS {
        cmd = cmd.subcommand(
            Command::new(name).about(about).arg(
                Arg::new("idset")
                    .value_name("IDSET")
                    .num_args(1..)
                    .help("An RFC 22 idset, or '-' to read idsets from standard input"),
            ),
        );
    }
    cmd
}

/// `roster R`: flux R's sub-commands and their liboptparse options.
fn r() -> Command {
    let about = super::r::DOC.lines().next().unwrap_or("");
    let mut cmd = Command::new("R")
        .about("RFC 20 resource sets (flux R)")
        .long_about(about)
        .subcommand_required(true);
    for sub in super::r::SUBS {
        let mut c = Command::new(sub.name).about(sub.doc);
        for o in sub.opts {
            let mut a = Arg::new(o.name).long(o.name).help(o.usage);
            if o.key.is_ascii_alphanumeric() {
                a = a.short(o.key);
            }
            a = match o.arginfo {
                Some(info) => {
                    let a = a.action(ArgAction::Set);
                    if info.is_empty() {
                        a
                    } else {
                        a.value_name(info)
                    }
                }
                None => a.action(ArgAction::SetTrue),
            };
            c = c.arg(a);
        }
        if !sub.usage.is_empty() && !sub.usage.starts_with('[') {
            c = c.arg(
                Arg::new("args")
                    .num_args(0..)
                    .value_name(sub.usage.split_whitespace().next().unwrap_or("ARG")),
            );
        }
        cmd = cmd.subcommand(c);
    }
    cmd
}

/// A parser of the argparse emulation, as a clap command.
fn from_argparse(name: &'static str, about: &'static str, p: &argparse::Parser) -> Command {
    let mut cmd = Command::new(name).about(about);
    convert(&mut cmd, p);
    cmd
}

fn convert(cmd: &mut Command, p: &argparse::Parser) {
    let mut c = std::mem::replace(cmd, Command::new("placeholder"));
    for a in p.arguments() {
        match a.action() {
            Action::Help => continue,
            Action::Subparsers => {
                c = c.subcommand_required(true);
                for (sub, sp) in p.subparsers_list() {
                    let mut sc = Command::new(sub);
                    convert(&mut sc, sp);
                    c = c.subcommand(sc);
                }
                continue;
            }
            _ => {}
        }
        let opts = a.option_strings();
        let mut arg = Arg::new(a.dest());
        match a.help_text() {
            Some(h) => arg = arg.help(h),
            None => arg = arg.hide(true),
        }
        let choices = a.choice_list().to_vec();
        if !choices.is_empty() {
            arg = arg.value_parser(clap::builder::PossibleValuesParser::new(choices));
        }
        if opts.is_empty() {
            let value_name = a.metavar_text().unwrap_or(a.dest()).to_uppercase();
            arg = arg.value_name(value_name);
            arg = match a.nargs() {
                Nargs::One => arg.required(true),
                Nargs::Optional => arg,
                _ => arg.num_args(1..).trailing_var_arg(true),
            };
        } else {
            let mut long_seen = false;
            let mut short_seen = false;
            for o in opts {
                if let Some(l) = o.strip_prefix("--") {
                    if long_seen {
                        arg = arg.visible_alias(l);
                    } else {
                        arg = arg.long(l);
                        long_seen = true;
                    }
                } else if let Some(ch) = o.strip_prefix('-').and_then(|s| {
                    let mut it = s.chars();
                    it.next().filter(|_| it.next().is_none())
                }) {
                    if !short_seen {
                        arg = arg.short(ch);
                        short_seen = true;
                    }
                }
            }
            arg = match (a.action(), a.nargs()) {
                (Action::Count, _) => arg.action(ArgAction::Count),
                (_, Nargs::Zero) => arg.action(ArgAction::SetTrue),
                (Action::Append | Action::SetUpdate, _) => arg.action(ArgAction::Append),
                (_, Nargs::Optional) => arg.num_args(0..=1),
                _ => arg.action(ArgAction::Set),
            };
            if !a.option_strings().is_empty() && a.nargs() != Nargs::Zero {
                let default = a.dest().to_uppercase();
                arg = arg.value_name(a.metavar_text().unwrap_or(&default).to_string());
            }
        }
        c = c.arg(arg);
    }
    *cmd = c;
}

/// `roster completions SHELL`.
pub fn completions_main(args: Vec<OsString>) -> ExitCode {
    let sub = Command::new("roster completions").arg(
        Arg::new("shell")
            .required(true)
            .value_parser(clap::value_parser!(Shell)),
    );
    let m = match super::clap_or_exit(sub.try_get_matches_from(args)) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let Some(shell) = m.get_one::<Shell>("shell").copied() else {
        return ExitCode::from(2);
    };
    let mut cmd = command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "roster", &mut out);
    write_out(&out)
}

/// `roster manpage [--dir DIR] [COMMAND...]`.
pub fn manpage_main(args: Vec<OsString>) -> ExitCode {
    let sub = Command::new("roster manpage")
        .arg(
            Arg::new("dir")
                .long("dir")
                .value_parser(clap::value_parser!(PathBuf)),
        )
        .arg(Arg::new("command").num_args(0..));
    let m = match super::clap_or_exit(sub.try_get_matches_from(args)) {
        Ok(m) => m,
        Err(code) => return code,
    };
    let mut cmd = command();
    cmd.build();
    if let Some(dir) = m.get_one::<PathBuf>("dir") {
        let write_all = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            let mut pages = Vec::new();
            all_pages(&cmd, "roster", &mut pages);
            for (name, page) in pages {
                std::fs::write(dir.join(format!("{name}.1")), render(page)?)?;
            }
            Ok(())
        };
        if let Err(e) = write_all() {
            eprintln!("roster manpage: {}: {e}", dir.display());
            return ExitCode::from(1);
        }
        return ExitCode::SUCCESS;
    }
    let path: Vec<&String> = m
        .get_many::<String>("command")
        .map(|v| v.collect())
        .unwrap_or_default();
    let mut page = cmd;
    let mut name = String::from("roster");
    for word in path {
        let Some(next) = page.find_subcommand(word.as_str()).cloned() else {
            eprintln!("roster manpage: no command '{name} {word}'");
            return ExitCode::from(2);
        };
        name = format!("{name}-{word}");
        page = next;
    }
    match render(page.name(name)) {
        Ok(out) => write_out(&out),
        Err(e) => {
            eprintln!("roster manpage: {e}");
            ExitCode::from(1)
        }
    }
}

/// Every page below `cmd` (itself included), named `roster-resource-drain`
/// and so on.
fn all_pages(cmd: &Command, name: &str, out: &mut Vec<(String, Command)>) {
    out.push((name.to_string(), cmd.clone().name(name.to_string())));
    for sub in cmd.get_subcommands() {
        all_pages(sub, &format!("{name}-{}", sub.get_name()), out);
    }
}

/// One page in roff; the footer names the package and version.
fn render(page: Command) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .source(format!("roster {}", env!("CARGO_PKG_VERSION")))
        .manual("Roster Manual")
        .render(&mut out)?;
    Ok(out)
}

fn write_out(bytes: &[u8]) -> ExitCode {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(bytes).and_then(|()| stdout.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("roster: {e}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_valid_and_complete() {
        let cmd = command();
        // clap's own consistency checks (debug builds)
        cmd.clone().debug_assert();
        let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
        for top in crate::COMMANDS {
            assert!(names.contains(&top), "{top} missing from {names:?}");
        }
        let resource = cmd.find_subcommand("resource").unwrap();
        for sub in super::super::resource::parser().subparsers_list() {
            assert!(
                resource.find_subcommand(sub.0).is_some(),
                "resource {} missing",
                sub.0
            );
        }
        let drain = resource.find_subcommand("drain").unwrap();
        let longs: Vec<&str> = drain.get_arguments().filter_map(|a| a.get_long()).collect();
        for l in [
            "force",
            "update",
            "include",
            "queue",
            "format",
            "no-header",
            "color",
            "json",
        ] {
            assert!(longs.contains(&l), "drain --{l} missing from {longs:?}");
        }
        let r = cmd.find_subcommand("R").unwrap();
        let encode = r.find_subcommand("encode").unwrap();
        assert!(encode.get_arguments().any(|a| a.get_short() == Some('H')));
        let idset = cmd.find_subcommand("idset").unwrap();
        assert_eq!(idset.get_subcommands().count(), 7);
        // every resource sub-command has its line
        for c in resource.get_subcommands() {
            assert!(c.get_about().is_some(), "resource {}", c.get_name());
        }
    }
}
