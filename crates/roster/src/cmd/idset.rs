//! `roster idset`: RFC 22 idset arithmetic from the command line.
//!
//! Every result is printed on one line in flux-core's canonical RANGE form
//! (an empty set is an empty line).  Invalid input exits 1 with the reason
//! on stderr and nothing on stdout.

use idset::IdSet;
use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

const USAGE: &str = "\
Usage: roster idset SUBCOMMAND IDSET...

Subcommands:
  normalize IDSET...     print each IDSET in canonical form, one per line
  expand IDSET...        print the ids of each IDSET, space separated, one line each
  count IDSET...         print the number of ids of each IDSET, one per line
  union IDSET...         print the union of all IDSETs
  intersect IDSET...     print the intersection of all IDSETs
  diff IDSET IDSET...    print the first IDSET minus all the others
  xor IDSET...           print the symmetric difference of all IDSETs (ids in an odd number of them)

An IDSET of '-' is read from standard input (one idset per line).
";

/// The sub-commands and what they do (for `roster completions` and
/// `roster manpage`; keep in step with [`USAGE`]).
pub(crate) const SUBCOMMANDS: [(&str, &str); 7] = [
    (
        "normalize",
        "print each IDSET in canonical form, one per line",
    ),
    (
        "expand",
        "print the ids of each IDSET, space separated, one line each",
    ),
    (
        "count",
        "print the number of ids of each IDSET, one per line",
    ),
    ("union", "print the union of all IDSETs"),
    ("intersect", "print the intersection of all IDSETs"),
    ("diff", "print the first IDSET minus all the others"),
    (
        "xor",
        "print the symmetric difference of all IDSETs (ids in an odd number of them)",
    ),
];

fn read_args(args: &[OsString]) -> Result<Vec<IdSet>, String> {
    let mut out = Vec::new();
    for a in args {
        let s = a
            .to_str()
            .ok_or_else(|| format!("argument is not valid UTF-8: {a:?}"))?;
        if s == "-" {
            let mut input = String::new();
            std::io::Read::read_to_string(&mut std::io::stdin(), &mut input)
                .map_err(|e| format!("reading standard input: {e}"))?;
            for line in input.lines() {
                let line = line.trim();
                out.push(IdSet::parse(line).map_err(|e| format!("invalid idset '{line}': {e}"))?);
            }
        } else {
            out.push(IdSet::parse(s).map_err(|e| format!("invalid idset '{s}': {e}"))?);
        }
    }
    Ok(out)
}

fn run(args: &[OsString]) -> Result<String, (u8, String)> {
    let sub = args.first().and_then(|s| s.to_str()).unwrap_or("");
    let operands = read_args(&args[1.min(args.len())..]).map_err(|e| (1, e))?;
    let need = |n: usize| -> Result<(), (u8, String)> {
        if operands.len() < n {
            Err((
                1,
                format!(
                    "{sub} requires at least {n} idset argument{}",
                    if n == 1 { "" } else { "s" }
                ),
            ))
        } else {
            Ok(())
        }
    };
    let mut out = String::new();
    match sub {
        "normalize" => {
            need(1)?;
            for s in &operands {
                out.push_str(&s.encode());
                out.push('\n');
            }
        }
        "expand" => {
            need(1)?;
            for s in &operands {
                let mut first = true;
                for id in s {
                    if !first {
                        out.push(' ');
                    }
                    first = false;
                    out.push_str(&id.to_string());
                }
                out.push('\n');
            }
        }
        "count" => {
            need(1)?;
            for s in &operands {
                out.push_str(&s.len().to_string());
                out.push('\n');
            }
        }
        "union" | "intersect" | "xor" => {
            need(1)?;
            let mut it = operands.iter();
            let mut acc = it.next().cloned().unwrap_or_default();
            for s in it {
                acc = match sub {
                    "union" => acc.union(s),
                    "intersect" => acc.intersection(s),
                    _ => acc.symmetric_difference(s),
                };
            }
            out.push_str(&acc.encode());
            out.push('\n');
        }
        "diff" => {
            need(2)?;
            let mut acc = operands[0].clone();
            for s in &operands[1..] {
                acc.subtract(s);
            }
            out.push_str(&acc.encode());
            out.push('\n');
        }
        "-h" | "--help" | "help" => out.push_str(USAGE),
        "" => return Err((2, format!("missing subcommand\n{USAGE}"))),
        other => return Err((2, format!("unknown subcommand '{other}'\n{USAGE}"))),
    }
    Ok(out)
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    match run(&args[1..]) {
        Ok(out) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(out.as_bytes())
                .and_then(|_| stdout.flush())
                .is_err()
            {
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err((code, msg)) => {
            eprintln!("roster idset: {msg}");
            ExitCode::from(code)
        }
    }
}
