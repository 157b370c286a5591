//! `roster hostlist`: mirrors `flux hostlist` (flux-core `src/cmd/flux-hostlist.py`,
//! `doc/man1/flux-hostlist.rst`, `t/t2814-hostlist-cmd.t`).
//!
//! The behaviour reproduces the Python command and the parts of flux's
//! Python bindings it relies on, observable quirks included:
//!
//! * options are parsed like Python's `argparse` (abbreviated long options,
//!   clustered short options, `-n -1` but not `-n -1,3`, `--nth=-1,3`,
//!   mutually exclusive `-e`/`-c` and `-i`/`-m`/`-X`, exit code 2 with a
//!   usage message on errors, positional arguments in one run);
//! * sources are concatenated by default; `-i` and `-X` fold pairwise (and
//!   sort/uniq), `-m` removes the first occurrence of each host;
//! * `-x` deletes every occurrence of the hosts; only when nothing was
//!   deleted is its argument tried as an idset of indices (built, as in
//!   Python, from the *sorted strings* of the hosts, so `-x 5,10` is not an
//!   idset but `-x 0-10` is);
//! * hosts taken one at a time (`-n`, `-L`, `-i`, `-X`, the idset form of
//!   `-x`) are re-parsed as hostlists, as `Hostlist.append()` does;
//! * `-n` counts negative indexes from the end (`-0` is the first host);
//! * output is the encoded list, or nothing for an empty list; `-q` exits 1
//!   when the result is empty.
//!
//! Sources that need a running instance (`instance`, `local`, `avail`,
//! `available` and job ids) are reported as errors: this command runs
//! offline.  With `-f/--fallback`, an argument that looks like a job id is
//! taken as a hostname, which is what flux-core does when the job is not
//! found.  Errors print `roster-hostlist: ERROR: <message>` on stderr and
//! exit 1, with flux's messages where flux has one.

use hostlist::{Finder, Hostlist};
use idset::IdSet;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

const PROG: &str = "roster-hostlist";

// ------------------------------------------------------------------ argparse emulation

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Act {
    Help,
    Expand,
    Delimiter,
    Count,
    Nth,
    Find,
    Limit,
    Sort,
    Exclude,
    Union,
    Intersect,
    Minus,
    Xor,
    Fallback,
    Local,
    Quiet,
}

struct OptDef {
    act: Act,
    strings: &'static [&'static str],
    takes_arg: bool,
    metavar: &'static str,
    help: &'static str,
}

/// The options in `add_argument()` order (which is argparse's matching order).
const OPTS: &[OptDef] = &[
    OptDef {
        act: Act::Help,
        strings: &["-h", "--help"],
        takes_arg: false,
        metavar: "",
        help: "show this help message and exit",
    },
    OptDef {
        act: Act::Expand,
        strings: &["-e", "--expand"],
        takes_arg: false,
        metavar: "",
        help: "Expand hostlist using defined output delimiter",
    },
    OptDef {
        act: Act::Delimiter,
        strings: &["-d", "--delimiter"],
        takes_arg: true,
        metavar: "S",
        help: "Set output delimiter for expanded hostlist (default=' ')",
    },
    OptDef {
        act: Act::Count,
        strings: &["-c", "--count"],
        takes_arg: false,
        metavar: "",
        help: "Print the total number of hosts",
    },
    OptDef {
        act: Act::Nth,
        strings: &["-n", "--nth"],
        takes_arg: true,
        metavar: "[-]IDS",
        help: "Output hosts at indices in idset IDS (-IDS to index from end)",
    },
    OptDef {
        act: Act::Find,
        strings: &["-F", "--find"],
        takes_arg: true,
        metavar: "HOSTS",
        help: "Output indices of HOSTS in target in hostlist. Fails if any host is not found.",
    },
    OptDef {
        act: Act::Limit,
        strings: &["-L", "--limit"],
        takes_arg: true,
        metavar: "N",
        help: "Output at most N hosts (-N for the last N hosts)",
    },
    OptDef {
        act: Act::Sort,
        strings: &["-S", "--sort"],
        takes_arg: false,
        metavar: "",
        help: "Return sorted result",
    },
    OptDef {
        act: Act::Exclude,
        strings: &["-x", "--exclude"],
        takes_arg: true,
        metavar: "IDS|HOSTS",
        help: "Exclude all occurrences of HOSTS or indices from final result",
    },
    OptDef {
        act: Act::Union,
        strings: &["-u", "--union", "--unique"],
        takes_arg: false,
        metavar: "",
        help: "Return only unique hosts in the final hostlist. Without other options, \
               this is the same as the union of all hostlist args (default mode is append).",
    },
    OptDef {
        act: Act::Intersect,
        strings: &["-i", "--intersect"],
        takes_arg: false,
        metavar: "",
        help: "Return the intersection of all hostlists",
    },
    OptDef {
        act: Act::Minus,
        strings: &["-m", "--minus"],
        takes_arg: false,
        metavar: "",
        help: "Subtract all hostlist args from first argument",
    },
    OptDef {
        act: Act::Xor,
        strings: &["-X", "--xor"],
        takes_arg: false,
        metavar: "",
        help: "Return the symmetric difference of all hostlists",
    },
    OptDef {
        act: Act::Fallback,
        strings: &["-f", "--fallback"],
        takes_arg: false,
        metavar: "",
        help: "Fallback to treating jobids that are not found as hostnames (for hostnames \
               that are also valid jobids e.g. f1, fuzz100, etc)",
    },
    OptDef {
        act: Act::Local,
        strings: &["-l", "--local"],
        takes_arg: false,
        metavar: "",
        help: "Set the default source to 'local' instead of 'stdin'",
    },
    OptDef {
        act: Act::Quiet,
        strings: &["-q", "--quiet"],
        takes_arg: false,
        metavar: "",
        help: "No output. Exit with nonzero exit status if hostlist is empty",
    },
];

/// Mutually exclusive groups.
const GROUPS: &[&[Act]] = &[
    &[Act::Expand, Act::Count],
    &[Act::Intersect, Act::Minus, Act::Xor],
];

const EPILOG: &str = "\
SOURCES may include:
instance     hosts from the broker 'hostlist' attribute.
jobid        hosts assigned to a job
local        hosts assigned to current job if FLUX_JOB_ID is set, otherwise
             returns the 'instance' hostlist
avail[able]  instance hostlist minus those nodes down or drained
stdin, '-'   read a list of hosts on stdin
hosts        literal list of hosts

The default when no SOURCES are supplied is 'stdin', unless the -l, --local
option is used, in which case the default is 'local'.

instance, jobid, local and avail[able] need a running Flux/Roster instance;
roster hostlist works offline and reports them as errors.
";

fn def(act: Act) -> Option<&'static OptDef> {
    OPTS.iter().find(|d| d.act == act)
}

fn act_name(act: Act) -> String {
    def(act).map_or_else(String::new, |d| d.strings.join("/"))
}

fn lookup(opt: &str) -> Option<Act> {
    OPTS.iter()
        .find(|d| d.strings.contains(&opt))
        .map(|d| d.act)
}

fn takes_arg(act: Act) -> bool {
    def(act).is_some_and(|d| d.takes_arg)
}

/// Python's `repr()` of a string, for argparse messages.
fn py_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::new();
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// The usage text argparse prints (wrapped at 78 columns like HelpFormatter).
fn usage() -> String {
    let mut parts: Vec<String> = Vec::new();
    for d in OPTS {
        let short = d.strings.first().copied().unwrap_or("");
        let part = if d.takes_arg {
            format!("{short} {}", d.metavar)
        } else {
            short.to_string()
        };
        parts.push(part);
    }
    // argparse brackets each optional; a mutually exclusive group is shown as
    // one bracket only when its options are adjacent (-i | -m | -X).
    let mut opt_parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < OPTS.len() {
        let act = OPTS.get(i).map(|d| d.act);
        if act == Some(Act::Intersect) {
            opt_parts.push("[-i | -m | -X]".to_string());
            i += 3;
            continue;
        }
        if let Some(p) = parts.get(i) {
            opt_parts.push(format!("[{p}]"));
        }
        i += 1;
    }
    let pos_parts = ["[SOURCES ...]".to_string()];
    let prefix = "usage: ";
    let text_width = 78usize;
    let full = format!(
        "{prefix}{PROG} {} {}",
        opt_parts.join(" "),
        pos_parts.join(" ")
    );
    if full.len() <= text_width {
        return format!("{full}\n");
    }
    let indent = " ".repeat(prefix.len() + PROG.len() + 1);
    let get_lines = |parts: &[String], first: Option<&str>| -> Vec<String> {
        let mut lines = Vec::new();
        let mut line: Vec<&str> = Vec::new();
        let mut line_len = first.map_or(indent.len() - 1, |p| p.len() - 1);
        for part in parts {
            if line_len + 1 + part.len() > text_width && !line.is_empty() {
                lines.push(format!("{indent}{}", line.join(" ")));
                line.clear();
                line_len = indent.len() - 1;
            }
            line.push(part);
            line_len += part.len() + 1;
        }
        if !line.is_empty() {
            lines.push(format!("{indent}{}", line.join(" ")));
        }
        if first.is_some() {
            if let Some(l) = lines.first_mut() {
                *l = l.get(indent.len()..).unwrap_or("").to_string();
            }
        }
        lines
    };
    let mut with_prog = vec![PROG.to_string()];
    with_prog.extend(opt_parts);
    let mut lines = get_lines(&with_prog, Some(prefix));
    lines.extend(get_lines(&pos_parts, None));
    format!("{prefix}{}\n", lines.join("\n"))
}

/// Greedy word wrap (Python's textwrap for plain words).
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for w in text.split_whitespace() {
        if !cur.is_empty() && cur.len() + 1 + w.len() > width {
            lines.push(std::mem::take(&mut cur));
        }
        if !cur.is_empty() {
            cur.push(' ');
        }
        cur.push_str(w);
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

/// The `--help` text (flux's help formatter: `-s, --long=ARG`).
fn help() -> String {
    let invocation = |d: &OptDef| {
        let s = d.strings.join(", ");
        if d.takes_arg {
            format!("{s}={}", d.metavar)
        } else {
            s
        }
    };
    let max_len = OPTS
        .iter()
        .map(|d| invocation(d).len() + 2)
        .max()
        .unwrap_or(0)
        .max("SOURCES".len() + 2);
    let help_pos = (max_len + 2).min(40);
    let help_width = 78usize.saturating_sub(help_pos).max(11);
    let mut out = usage();
    let item = |out: &mut String, inv: &str, help: &str| {
        let lines = wrap(help, help_width);
        let mut first = true;
        if inv.len() + 2 <= help_pos - 2 {
            out.push_str(&format!("  {inv:<w$}  ", w = help_pos - 4));
        } else {
            out.push_str(&format!("  {inv}\n"));
            first = false;
        }
        for l in lines {
            if first {
                out.push_str(&l);
                out.push('\n');
                first = false;
            } else {
                out.push_str(&format!("{:w$}{l}\n", "", w = help_pos));
            }
        }
    };
    out.push_str("\npositional arguments:\n");
    item(
        &mut out,
        "SOURCES",
        "(optional) One or more hostlist sources",
    );
    out.push_str("\noptions:\n");
    for d in OPTS {
        item(&mut out, &invocation(d), d.help);
    }
    out.push('\n');
    out.push_str(EPILOG);
    out
}

/// Parsed command line.
#[derive(Default)]
struct Args {
    expand: bool,
    delimiter: Option<String>,
    count: bool,
    nth: Option<String>,
    find: Option<String>,
    limit: Option<i128>,
    sort: bool,
    exclude: Option<Hostlist>,
    union: bool,
    intersect: bool,
    minus: bool,
    xor: bool,
    fallback: bool,
    local: bool,
    quiet: bool,
    sources: Vec<String>,
}

/// How parsing ended early.
enum Stop {
    /// `-h`: print help, exit 0.
    Help,
    /// argparse error: usage + message, exit 2.
    Usage(String),
}

/// Classification of one command-line word (argparse's `_parse_optional`).
#[derive(Clone)]
enum Word {
    /// A positional argument ('A').
    Pos,
    /// The first `--` ('-'): everything after it is positional.
    DashDash,
    /// An option ('O'): the action (None if unknown), the option string
    /// matched, an explicit argument (`--nth=1`, `-n1`) and whether that
    /// argument followed an `=` (argparse's `sep`).
    Opt(Option<(Act, &'static str, Option<String>, bool)>),
}

/// argparse's negative number pattern `^-\d+$|^-\d*\.\d+$`.
fn looks_negative_number(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('-') else {
        return false;
    };
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if all_digits(rest) {
        return true;
    }
    match rest.split_once('.') {
        Some((a, b)) => (a.is_empty() || a.bytes().all(|c| c.is_ascii_digit())) && all_digits(b),
        None => false,
    }
}

fn classify(arg: &str) -> Result<Word, Stop> {
    if arg.is_empty() || !arg.starts_with('-') {
        return Ok(Word::Pos);
    }
    if let Some(act) = lookup(arg) {
        let s = def(act)
            .and_then(|d| d.strings.iter().find(|&&x| x == arg))
            .copied()
            .unwrap_or("");
        return Ok(Word::Opt(Some((act, s, None, false))));
    }
    if arg.len() == 1 {
        return Ok(Word::Pos);
    }
    if let Some((o, v)) = arg.split_once('=') {
        if let Some(act) = lookup(o) {
            let s = def(act)
                .and_then(|d| d.strings.iter().find(|&&x| x == o))
                .copied()
                .unwrap_or("");
            return Ok(Word::Opt(Some((act, s, Some(v.to_string()), true))));
        }
    }
    // Abbreviations and attached short-option arguments.
    let mut matches: Vec<(Act, &'static str, Option<String>, bool)> = Vec::new();
    if let Some(long) = arg.strip_prefix("--") {
        let _ = long;
        let (pfx, explicit) = match arg.split_once('=') {
            Some((p, v)) => (p, Some(v.to_string())),
            None => (arg, None),
        };
        let sep = explicit.is_some();
        for d in OPTS {
            for &s in d.strings {
                if s.starts_with(pfx) {
                    matches.push((d.act, s, explicit.clone(), sep));
                }
            }
        }
    } else {
        let short: String = arg.chars().take(2).collect();
        let rest: String = arg.chars().skip(2).collect();
        for d in OPTS {
            for &s in d.strings {
                if s == short {
                    matches.push((d.act, s, Some(rest.clone()), false));
                } else if s.starts_with(arg) {
                    matches.push((d.act, s, None, false));
                }
            }
        }
    }
    if matches.len() > 1 {
        let names: Vec<&str> = matches.iter().map(|m| m.1).collect();
        return Err(Stop::Usage(format!(
            "ambiguous option: {arg} could match {}",
            names.join(", ")
        )));
    }
    if let Some(m) = matches.pop() {
        return Ok(Word::Opt(Some(m)));
    }
    if looks_negative_number(arg) || arg.contains(' ') {
        return Ok(Word::Pos);
    }
    Ok(Word::Opt(None))
}

/// Python `int()` on a command-line string.
fn py_int(s: &str) -> Option<i128> {
    let t = s.trim_matches(|c: char| c.is_whitespace());
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, t.get(1..)?),
        Some(b'+') => (false, t.get(1..)?),
        _ => (false, t),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return None;
    }
    let mut v: i128 = 0;
    for b in digits.bytes() {
        match b {
            b'_' => continue,
            b'0'..=b'9' => {
                v = v.saturating_mul(10).saturating_add(i128::from(b - b'0'));
            }
            _ => return None,
        }
    }
    Some(if neg { -v } else { v })
}

struct Parser {
    args: Args,
    seen: Vec<Act>,
}

impl Parser {
    fn take(&mut self, act: Act, value: Option<String>) -> Result<(), Stop> {
        let err = |msg: String| Stop::Usage(format!("argument {}: {msg}", act_name(act)));
        // type conversion first, as argparse's _get_values
        match act {
            Act::Help => return Err(Stop::Help),
            Act::Limit => {
                let v = value.clone().unwrap_or_default();
                match py_int(&v) {
                    Some(n) => self.args.limit = Some(n),
                    None => return Err(err(format!("invalid int value: {}", py_repr(&v)))),
                }
            }
            Act::Exclude => {
                let v = value.clone().unwrap_or_default();
                match Hostlist::decode(&v) {
                    Ok(h) => self.args.exclude = Some(h),
                    Err(_) => return Err(err(format!("invalid Hostlist value: {}", py_repr(&v)))),
                }
            }
            _ => {}
        }
        // conflicts with previously seen members of a mutually exclusive group
        if !self.seen.contains(&act) {
            self.seen.push(act);
        }
        for g in GROUPS {
            if g.contains(&act) {
                if let Some(other) = self.seen.iter().find(|&&s| s != act && g.contains(&s)) {
                    return Err(err(format!(
                        "not allowed with argument {}",
                        act_name(*other)
                    )));
                }
            }
        }
        let a = &mut self.args;
        match act {
            Act::Expand => a.expand = true,
            Act::Delimiter => a.delimiter = value,
            Act::Count => a.count = true,
            Act::Nth => a.nth = value,
            Act::Find => a.find = value,
            Act::Sort => a.sort = true,
            Act::Union => a.union = true,
            Act::Intersect => a.intersect = true,
            Act::Minus => a.minus = true,
            Act::Xor => a.xor = true,
            Act::Fallback => a.fallback = true,
            Act::Local => a.local = true,
            Act::Quiet => a.quiet = true,
            Act::Help | Act::Limit | Act::Exclude => {}
        }
        Ok(())
    }
}

fn parse_args(words: &[String]) -> Result<Args, Stop> {
    // 1. classify every word (ambiguity errors come first, as in argparse)
    let mut classes: Vec<Word> = Vec::with_capacity(words.len());
    let mut after_dd = false;
    for w in words {
        if after_dd {
            classes.push(Word::Pos);
        } else if w == "--" {
            classes.push(Word::DashDash);
            after_dd = true;
        } else {
            classes.push(classify(w)?);
        }
    }
    let is_opt = |i: usize| matches!(classes.get(i), Some(Word::Opt(_)));
    let is_pos = |i: usize| matches!(classes.get(i), Some(Word::Pos));

    let mut p = Parser {
        args: Args::default(),
        seen: Vec::new(),
    };
    let mut extras: Vec<String> = Vec::new();
    let mut sources_taken = false;
    let mut i = 0usize;
    let n = words.len();
    // positional runs are matched to SOURCES (nargs='*') once
    let mut take_positionals = |i: &mut usize, p: &mut Parser, extras: &mut Vec<String>| {
        let start = *i;
        while *i < n && !is_opt(*i) {
            *i += 1;
        }
        let chunk = words.get(start..*i).unwrap_or(&[]);
        if sources_taken {
            extras.extend(chunk.iter().cloned());
            return;
        }
        sources_taken = true;
        let mut v: Vec<String> = chunk.to_vec();
        if let Some(pos) = v.iter().position(|s| s == "--") {
            v.remove(pos);
        }
        p.args.sources = v;
    };
    while i < n {
        if !is_opt(i) {
            take_positionals(&mut i, &mut p, &mut extras);
            continue;
        }
        let Some(Word::Opt(o)) = classes.get(i).cloned() else {
            i += 1;
            continue;
        };
        let Some((mut act, mut optstr, mut explicit, mut sep)) = o else {
            extras.push(words.get(i).cloned().unwrap_or_default());
            i += 1;
            continue;
        };
        // argparse's consume_optional(): the actions of one word (`-Sux`) are
        // collected first and taken only once the word is parsed, so an error
        // in the word comes before a conflict of its earlier options.
        let ignored = |act: Act, x: &str| {
            Stop::Usage(format!(
                "argument {}: ignored explicit argument {}",
                act_name(act),
                py_repr(x)
            ))
        };
        let mut pending: Vec<(Act, Option<String>)> = Vec::new();
        loop {
            match explicit.take() {
                Some(x) => {
                    let single_dash = !optstr.starts_with("--");
                    if !takes_arg(act) {
                        if single_dash && !x.is_empty() {
                            // `-e=S` and `-e-S` are not clusters
                            if sep || x.starts_with('-') {
                                return Err(ignored(act, &x));
                            }
                            pending.push((act, None));
                            let mut chars = x.chars();
                            let c = chars.next().unwrap_or('-');
                            let rest: String = chars.collect();
                            let next = format!("-{c}");
                            match lookup(&next) {
                                Some(a2) => {
                                    act = a2;
                                    optstr = def(a2)
                                        .and_then(|d| d.strings.iter().find(|&&s| s == next))
                                        .copied()
                                        .unwrap_or("");
                                    (explicit, sep) = if rest.is_empty() {
                                        (None, false)
                                    } else if let Some(r) = rest.strip_prefix('=') {
                                        (Some(r.to_string()), true)
                                    } else {
                                        (Some(rest), false)
                                    };
                                    continue;
                                }
                                None => {
                                    // an unknown letter: the rest of the word
                                    // is an unrecognized argument
                                    extras.push(format!("-{x}"));
                                    i += 1;
                                    break;
                                }
                            }
                        }
                        return Err(ignored(act, &x));
                    }
                    pending.push((act, Some(x)));
                    i += 1;
                    break;
                }
                None => {
                    if !takes_arg(act) {
                        pending.push((act, None));
                        i += 1;
                        break;
                    }
                    // pattern -*A-* : optional "--" markers, one positional
                    let mut j = i + 1;
                    while matches!(classes.get(j), Some(Word::DashDash)) {
                        j += 1;
                    }
                    if !is_pos(j) {
                        return Err(Stop::Usage(format!(
                            "argument {}: expected one argument",
                            act_name(act)
                        )));
                    }
                    let value = words.get(j).cloned().unwrap_or_default();
                    j += 1;
                    while matches!(classes.get(j), Some(Word::DashDash)) {
                        j += 1;
                    }
                    pending.push((act, Some(value)));
                    i = j;
                    break;
                }
            }
        }
        for (a, v) in pending {
            p.take(a, v)?;
        }
    }
    if !extras.is_empty() {
        return Err(Stop::Usage(format!(
            "unrecognized arguments: {}",
            extras.join(" ")
        )));
    }
    Ok(p.args)
}

// ------------------------------------------------------------------ job ids (RFC 19)

fn c_isspace(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// strtoul/strtoull-style scan: optional white space and sign, then digits
/// of `radix` (with an optional `0x` for 16).  Returns (bytes consumed or 0,
/// overflowed).
fn scan_uint(s: &[u8], radix: u32) -> (usize, bool) {
    let mut i = s.iter().take_while(|&&b| c_isspace(b)).count();
    if matches!(s.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    if radix == 16
        && s.get(i) == Some(&b'0')
        && matches!(s.get(i + 1), Some(b'x' | b'X'))
        && s.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
    {
        i += 2;
    }
    let start = i;
    let mut v: u64 = 0;
    let mut overflow = false;
    while let Some(d) = s.get(i).and_then(|&b| char::from(b).to_digit(radix)) {
        match v
            .checked_mul(u64::from(radix))
            .and_then(|x| x.checked_add(u64::from(d)))
        {
            Some(x) => v = x,
            None => overflow = true,
        }
        i += 1;
    }
    if i == start {
        (0, false)
    } else {
        (i, overflow)
    }
}

/// Would flux's `JobID(arg)` (`flux_job_id_parse`) accept `arg`?  Decimal,
/// `0x` hex, dotted hex and F58 (`ƒ`/`f` + base58) forms are recognised;
/// the mnemonic ("words") form is not (such arguments are taken as hostlists).
fn is_jobid(arg: &str) -> bool {
    fn skip_space(mut p: &[u8]) -> &[u8] {
        while let Some((&c, rest)) = p.split_first() {
            if !c_isspace(c) {
                break;
            }
            p = rest;
        }
        p
    }
    // flux_job_id_parse(): non-empty, skip white space, drop a "job." prefix
    if arg.is_empty() {
        return false;
    }
    let mut p = skip_space(arg.as_bytes());
    if let Some(rest) = p.strip_prefix(b"job.") {
        p = rest;
    }
    // fluid_parse(): non-empty, skip white space, detect the encoding
    if p.is_empty() {
        return false;
    }
    let p = skip_space(p);
    if p.contains(&b'.') {
        // dotted hex: four strtoul(16) fields separated by '.', the last ending the string
        let fields: Vec<&[u8]> = p.split(|&c| c == b'.').collect();
        return fields.len() == 4
            && fields.iter().all(|f| {
                let (used, _) = scan_uint(f, 16);
                f.is_empty() || used == f.len()
            });
    }
    if p.contains(&b'-') {
        // the mnemonic form; not recognised here
        return false;
    }
    if let Some(digits) = p
        .strip_prefix("\u{192}".as_bytes())
        .or_else(|| p.strip_prefix(b"f"))
    {
        const B58: &[u8] = b"123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz";
        return !digits.is_empty() && digits.len() <= 12 && digits.iter().all(|c| B58.contains(c));
    }
    // an integer, 0x-prefixed hex or decimal, with only white space after it
    if p.is_empty() {
        return true;
    }
    let radix = if p.starts_with(b"0x") { 16 } else { 10 };
    let (used, overflow) = scan_uint(p, radix);
    used > 0
        && !overflow
        && p.get(used..)
            .is_some_and(|t| t.iter().all(|&c| c_isspace(c)))
}

// ------------------------------------------------------------------ Python-binding emulation

type PyResult<T> = Result<T, String>;

/// `Hostlist.append(str)`: decode, then append.
fn py_append_str(hl: &mut Hostlist, s: &str) -> PyResult<()> {
    match Hostlist::decode(s) {
        Ok(h) => {
            hl.append(&h);
            Ok(())
        }
        Err(_) => Err(format!("Invalid hostlist: '{s}'")),
    }
}

/// Decode the bytes `hostlist_nth()` returned as Python does.
fn py_host(bytes: Option<Vec<u8>>) -> PyResult<String> {
    let Some(bytes) = bytes else {
        return Err("'NoneType' object has no attribute 'decode'".to_string());
    };
    String::from_utf8(bytes).map_err(|e| {
        let p = e.utf8_error().valid_up_to();
        let bad = e.as_bytes().get(p..).unwrap_or(&[]);
        if bad.len() <= 1 {
            format!(
                "'utf-8' codec can't decode byte 0x{:02x} in position {p}: unexpected end of data",
                bad.first().copied().unwrap_or(0)
            )
        } else {
            format!(
                "'utf-8' codec can't decode bytes in position {p}-{}: unexpected end of data",
                p + bad.len() - 1
            )
        }
    })
}

/// `hl[i]` with Python's negative indexes.
fn py_getitem(hl: &Hostlist, index: i128) -> PyResult<String> {
    let len = i128::try_from(hl.len()).unwrap_or(i128::MAX);
    let idx = if index < 0 { len + index } else { index };
    let out_of_range = || "Hostlist index out of range".to_string();
    if idx < 0 || idx >= len {
        return Err(out_of_range());
    }
    let i = usize::try_from(idx).map_err(|_| out_of_range())?;
    py_host(hl.nth_flux(i).ok_or_else(out_of_range)?)
}

/// `hl[i]` for ascending `i`, in time linear in the list rather than in
/// entries times indexes.
struct PyCursor<'a> {
    it: Box<dyn Iterator<Item = Option<Vec<u8>>> + 'a>,
    next: usize,
    len: usize,
}

impl<'a> PyCursor<'a> {
    fn new(hl: &'a Hostlist) -> Self {
        PyCursor {
            it: Box::new(hl.iter_flux()),
            next: 0,
            len: hl.len(),
        }
    }

    /// `hl[idx]`; `idx` must not be below a previous call's.
    fn get(&mut self, idx: usize) -> PyResult<String> {
        let out_of_range = || "Hostlist index out of range".to_string();
        if idx >= self.len || idx < self.next {
            return Err(out_of_range());
        }
        let skip = idx - self.next;
        self.next = idx + 1;
        py_host(self.it.nth(skip).ok_or_else(out_of_range)?)
    }
}

/// `for host in hl` (the iterator indexes the list, so long names fail as in Python).
fn py_hosts(hl: &Hostlist) -> PyResult<Vec<String>> {
    hl.iter_flux().map(py_host).collect()
}

/// The text of the `OSError` flux's Python wrapper raises when a libhostlist
/// call fails with EINVAL (`"<errno name>: <strerror>"`; `CLIMain` prints it).
const WRAPPER_EINVAL: &str = "EINVAL: Invalid argument";
/// The same for ERANGE.
const WRAPPER_ERANGE: &str = "ERANGE: Numerical result out of range";

/// `host in hl`: a name flux-core rejects raises EINVAL.
fn py_contains(hl: &Finder<'_>, host: &str) -> PyResult<bool> {
    hl.try_find(host)
        .map(|r| r.is_some())
        .map_err(|_| WRAPPER_EINVAL.to_string())
}

/// `hl.delete(hosts)`: `hostlist_delete(hl, str(hosts))`.  Returns flux-core's
/// count: hosts removed minus names it rejects (errno ends up 0, so a negative
/// count is returned, not raised).  The hosts are walked with flux-core's
/// C iterator, which stops at a host too long for its buffer.
fn py_delete(hl: &mut Hostlist, hosts: &Hostlist) -> PyResult<i64> {
    let del = Hostlist::decode(&hosts.encode()).map_err(|e| {
        if e.is_range_error() {
            WRAPPER_ERANGE.to_string()
        } else {
            WRAPPER_EINVAL.to_string()
        }
    })?;
    let mut n: i64 = 0;
    for bytes in del.iter_flux() {
        let Some(bytes) = bytes else {
            break;
        };
        let host = String::from_utf8_lossy(&bytes);
        match hl.remove_first(&host) {
            Ok(true) => n += 1,
            Ok(false) => {}
            Err(_) => n -= 1,
        }
    }
    Ok(n)
}

fn py_idset(s: &str) -> PyResult<IdSet> {
    IdSet::parse(s).map_err(|_| format!("IDset(): Invalid argument: {s}"))
}

/// flux-hostlist.py `intersect()`.
fn intersect(hl1: &Hostlist, hl2: &Hostlist) -> PyResult<Hostlist> {
    let mut result = Hostlist::new();
    let hl2 = hl2.finder();
    for host in py_hosts(hl1)? {
        if py_contains(&hl2, &host)? {
            py_append_str(&mut result, &host)?;
        }
    }
    result.uniq();
    Ok(result)
}

/// flux-hostlist.py `difference()`.
fn difference(hl1: &Hostlist, hl2: &Hostlist) -> PyResult<Hostlist> {
    let mut result = Hostlist::new();
    let hl2 = hl2.finder();
    for host in py_hosts(hl1)? {
        if !py_contains(&hl2, &host)? {
            py_append_str(&mut result, &host)?;
        }
    }
    Ok(result)
}

/// flux-hostlist.py `xor()`.
fn xor(hl1: &Hostlist, hl2: &Hostlist) -> PyResult<Hostlist> {
    let mut result = difference(hl1, hl2)?;
    result.append(&difference(hl2, hl1)?);
    result.uniq();
    Ok(result)
}

/// Python's `repr()` of a float (for the stdin timeout message).
fn py_float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // shortest round-trip digits and exponent
    let sci = format!("{x:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let plain = format!("{x}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let m = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

/// Read standard input like `StdinHostlistResult`: wait at most the timeout
/// (FLUX_HOSTLIST_STDIN_TIMEOUT, default 15 s) for it to become readable,
/// then read every line and append it as a hostlist.
fn read_stdin(state: &mut StdinState) -> PyResult<Hostlist> {
    let var = std::env::var("ROSTER_HOSTLIST_STDIN_TIMEOUT")
        .or_else(|_| std::env::var("FLUX_HOSTLIST_STDIN_TIMEOUT"))
        .ok();
    let timeout = match var {
        None => 15.0,
        Some(v) => v
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("could not convert string to float: {}", py_repr(&v)))?,
    };
    if timeout.is_nan() {
        return Err("Invalid value NaN (not a number)".to_string());
    }
    if timeout < 0.0 {
        return Err("timeout must be non-negative".to_string());
    }
    let data = match state {
        StdinState::Consumed => Vec::new(),
        StdinState::Fresh => {
            *state = StdinState::Consumed;
            let (ready_tx, ready_rx) = mpsc::channel::<()>();
            let (data_tx, data_rx) = mpsc::channel::<Vec<u8>>();
            std::thread::spawn(move || {
                let mut stdin = std::io::stdin().lock();
                let mut data = Vec::new();
                let mut buf = [0u8; 65536];
                let mut first = true;
                loop {
                    let r = stdin.read(&mut buf);
                    if first {
                        let _ = ready_tx.send(());
                        first = false;
                    }
                    match r {
                        Ok(0) | Err(_) => break,
                        Ok(k) => data.extend_from_slice(buf.get(..k).unwrap_or(&[])),
                    }
                }
                let _ = data_tx.send(data);
            });
            // Python select()s stdin; here a reader thread reports its first
            // read.  Allow it a few milliseconds to start so that input that is
            // already there is seen even with a zero timeout.
            let ready = if timeout.is_finite() && timeout < 1e9 {
                ready_rx
                    .recv_timeout(Duration::from_secs_f64(timeout.max(0.02)))
                    .is_ok()
            } else {
                ready_rx.recv().is_ok()
            };
            if !ready {
                return Err(format!(
                    "timeout after {}s waiting for stdin",
                    py_float_repr(timeout)
                ));
            }
            data_rx.recv().unwrap_or_default()
        }
    };
    let text = String::from_utf8(data).map_err(|e| {
        format!(
            "'utf-8' codec can't decode byte 0x{:02x} in position {}: invalid start byte",
            e.as_bytes()
                .get(e.utf8_error().valid_up_to())
                .copied()
                .unwrap_or(0),
            e.utf8_error().valid_up_to()
        )
    })?;
    let mut hl = Hostlist::new();
    // sys.stdin splits lines at "\n" only (no universal newlines on POSIX),
    // then each line is rstrip()ped
    let mut lines: Vec<&str> = text.split('\n').collect();
    if lines.last() == Some(&"") {
        lines.pop();
    }
    for line in lines {
        // str.rstrip(): Unicode white space plus the \x1c-\x1f separators
        let line =
            line.trim_end_matches(|c: char| c.is_whitespace() || ('\x1c'..='\x1f').contains(&c));
        py_append_str(&mut hl, line)?;
    }
    Ok(hl)
}

enum StdinState {
    Fresh,
    Consumed,
}

// ------------------------------------------------------------------ main flow

fn need_instance(source: &str) -> String {
    format!(
        "source '{source}' needs a running Flux/Roster instance (roster hostlist works offline)"
    )
}

fn resolve(args: &Args) -> PyResult<Vec<Hostlist>> {
    let default = if args.local { "local" } else { "stdin" };
    let sources: Vec<String> = if args.sources.is_empty() {
        vec![default.to_string()]
    } else {
        args.sources.clone()
    };
    let mut stdin = StdinState::Fresh;
    let mut out = Vec::with_capacity(sources.len());
    for arg in &sources {
        let hl = match arg.as_str() {
            "instance" | "local" | "avail" | "available" => return Err(need_instance(arg)),
            "stdin" | "-" => read_stdin(&mut stdin)?,
            _ if is_jobid(arg) => {
                if args.fallback {
                    Hostlist::decode(arg).map_err(|_| format!("Invalid hostlist: '{arg}'"))?
                } else {
                    return Err(format!(
                        "job {arg} not found: looking up jobs needs a running Flux/Roster \
                         instance (use -f/--fallback to treat it as a hostname)"
                    ));
                }
            }
            // (an argument that was not valid UTF-8 carries U+FFFD: Python fails to encode it)
            _ if arg.contains('\u{FFFD}') => {
                return Err(format!("Invalid jobid or hostlist {arg}"))
            }
            _ => Hostlist::decode(arg).map_err(|_| format!("Invalid jobid or hostlist {arg}"))?,
        };
        out.push(hl);
    }
    Ok(out)
}

/// Run with parsed arguments; returns (stdout text, exit code).
fn run(args: &Args) -> PyResult<(String, u8)> {
    let mut hostlists = resolve(args)?.into_iter();
    let mut hl = Hostlist::new();
    if args.intersect {
        hl = hostlists.next().unwrap_or_default();
        for x in hostlists {
            hl = intersect(&hl, &x)?;
        }
    } else if args.xor {
        hl = hostlists.next().unwrap_or_default();
        for x in hostlists {
            hl = xor(&hl, &x)?;
        }
    } else if args.minus {
        hl = hostlists.next().unwrap_or_default();
        for x in hostlists {
            py_delete(&mut hl, &x)?;
        }
    } else {
        for x in hostlists {
            hl.append(&x);
        }
    }

    if let Some(ex) = args.exclude.as_ref().filter(|e| !e.is_empty()) {
        let count = hl.len();
        while py_delete(&mut hl, ex)? > 0 {}
        if hl.len() == count {
            // IDset(Hostlist): the hosts' strings, sorted, joined with ','
            let mut names = py_hosts(ex)?;
            names.sort();
            if let Ok(ids) = IdSet::parse(&names.join(",")) {
                let mut keep = Vec::new();
                for (i, host) in hl.iter_flux().enumerate().take(count) {
                    let excluded = u32::try_from(i).is_ok_and(|i| ids.contains(i));
                    if !excluded {
                        keep.push(py_host(host)?);
                    }
                }
                let mut nl = Hostlist::new();
                for h in &keep {
                    py_append_str(&mut nl, h)?;
                }
                hl = nl;
            }
        }
    }

    if args.sort {
        hl.sort();
    }
    if args.union {
        hl.uniq();
    }

    if let Some(limit) = args.limit.filter(|&l| l != 0) {
        let len = i128::try_from(hl.len()).unwrap_or(i128::MAX);
        let (start, stop) = if limit > 0 {
            (0, limit.min(len))
        } else {
            ((len + limit).max(0), len)
        };
        let mut nl = Hostlist::new();
        let mut cur = PyCursor::new(&hl);
        let mut i = start;
        while i < stop {
            let h = cur.get(usize::try_from(i).unwrap_or(usize::MAX))?;
            py_append_str(&mut nl, &h)?;
            i += 1;
        }
        drop(cur);
        hl = nl;
    }

    if let Some(nth) = &args.nth {
        let mut nl = Hostlist::new();
        if let Some(rest) = nth.strip_prefix('-') {
            let ids = py_idset(rest)?;
            // hl[-x] for x in reversed(ids): ascending indexes len-x, then
            // hl[-0] (the first host) last.
            let len = i128::try_from(hl.len()).unwrap_or(i128::MAX);
            let mut cur = PyCursor::new(&hl);
            let mut picked = Vec::new();
            for &(lo, hi) in ids.ranges().iter().rev() {
                let mut x = hi;
                loop {
                    let idx = len - i128::from(x);
                    picked.push(if x == 0 {
                        py_getitem(&hl, 0)?
                    } else if idx < 0 {
                        return Err("Hostlist index out of range".to_string());
                    } else {
                        cur.get(usize::try_from(idx).unwrap_or(usize::MAX))?
                    });
                    if x == lo {
                        break;
                    }
                    x -= 1;
                }
            }
            for h in &picked {
                py_append_str(&mut nl, h)?;
            }
        } else {
            let ids = py_idset(nth)?;
            let mut cur = PyCursor::new(&hl);
            for id in ids.iter() {
                let h = cur.get(usize::try_from(id).unwrap_or(usize::MAX))?;
                py_append_str(&mut nl, &h)?;
            }
        }
        hl = nl;
    }

    let mut out = String::new();
    // `if args.find:` — an empty HOSTS string is false, so `-F ''` is ignored
    if let Some(find) = args.find.as_ref().filter(|f| !f.is_empty()) {
        let hosts = Hostlist::decode(find).map_err(|_| format!("Invalid hostlist: '{find}'"))?;
        let mut ids: Vec<String> = Vec::new();
        let mut notfound = Hostlist::new();
        let finder = hl.finder();
        for host in py_hosts(&hosts)? {
            match finder.try_find(&host) {
                Ok(Some(i)) => ids.push(i.to_string()),
                Ok(None) => py_append_str(&mut notfound, &host)?,
                Err(_) => return Err(WRAPPER_EINVAL.to_string()),
            }
        }
        if !notfound.is_empty() {
            let s = if notfound.len() > 1 { "s" } else { "" };
            return Err(format!("host{s} '{}' not found", notfound.encode()));
        }
        out.push_str(&ids.join(" "));
        out.push('\n');
    } else if args.count {
        out.push_str(&format!("{}\n", hl.len()));
    } else if args.expand {
        if !hl.is_empty() {
            let delim = args
                .delimiter
                .as_deref()
                .unwrap_or(" ")
                .replace("\\n", "\n");
            out.push_str(&py_hosts(&hl)?.join(&delim));
            out.push('\n');
        }
    } else if !hl.is_empty() {
        out.push_str(&hl.encode());
        out.push('\n');
    }
    if args.quiet {
        out.clear();
    }
    let code = u8::from(args.quiet && hl.is_empty());
    Ok((out, code))
}

/// Entry point: `args[0]` is the program name, the rest are the options.
pub fn main(args: Vec<OsString>) -> ExitCode {
    let words: Vec<String> = args
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let parsed = match parse_args(&words) {
        Ok(a) => a,
        Err(Stop::Help) => {
            print!("{}", help());
            return ExitCode::SUCCESS;
        }
        Err(Stop::Usage(msg)) => {
            eprint!("{}", usage());
            eprintln!("{PROG}: error: {msg}");
            return ExitCode::from(2);
        }
    };
    match run(&parsed) {
        Ok((out, code)) => {
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                eprintln!("{PROG}: ERROR: Broken pipe");
                return ExitCode::from(1);
            }
            ExitCode::from(code)
        }
        Err(msg) => {
            eprintln!("{PROG}: ERROR: {msg}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, String> {
        let w: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        parse_args(&w).map_err(|e| match e {
            Stop::Help => "HELP".to_string(),
            Stop::Usage(m) => m,
        })
    }

    #[test]
    fn argparse_negative_numbers_and_attached_values() {
        let a = parse(&["-n", "-1", "foo[1-10]"]).unwrap_or_default();
        assert_eq!(a.nth.as_deref(), Some("-1"));
        assert_eq!(a.sources, ["foo[1-10]"]);
        let a = parse(&["--nth=-1,3-4", "foo[1-10]"]).unwrap_or_default();
        assert_eq!(a.nth.as_deref(), Some("-1,3-4"));
        assert_eq!(
            parse(&["-n", "-1,3-4", "foo[1-10]"]).err().as_deref(),
            Some("argument -n/--nth: expected one argument")
        );
        let a = parse(&["-n-1,3", "x"]).unwrap_or_default();
        assert_eq!(a.nth.as_deref(), Some("-1,3"));
        let a = parse(&["-L", "-2", "x"]).unwrap_or_default();
        assert_eq!(a.limit, Some(-2));
        let a = parse(&["-led\\n"]).unwrap_or_default();
        assert!(a.local && a.expand);
        assert_eq!(a.delimiter.as_deref(), Some("\\n"));
        let a = parse(&["-qm", "a", "b"]).unwrap_or_default();
        assert!(a.quiet && a.minus);
        assert_eq!(a.sources, ["a", "b"]);
        let a = parse(&["--exp", "--del=,", "x"]).unwrap_or_default();
        assert!(a.expand);
        assert_eq!(a.delimiter.as_deref(), Some(","));
        let a = parse(&["-d=,", "x"]).unwrap_or_default();
        assert_eq!(a.delimiter.as_deref(), Some(","));
        let a = parse(&["--", "-x"]).unwrap_or_default();
        assert_eq!(a.sources, ["-x"]);
        let a = parse(&["-", "x"]).unwrap_or_default();
        assert_eq!(a.sources, ["-", "x"]);
    }

    #[test]
    fn argparse_errors() {
        assert_eq!(
            parse(&["-e", "-c", "x"]).err().as_deref(),
            Some("argument -c/--count: not allowed with argument -e/--expand")
        );
        assert_eq!(
            parse(&["-i", "-X", "x"]).err().as_deref(),
            Some("argument -X/--xor: not allowed with argument -i/--intersect")
        );
        assert_eq!(
            parse(&["--u", "x"]).err().as_deref(),
            Some("ambiguous option: --u could match --union, --unique")
        );
        assert_eq!(
            parse(&["--ex", "x"]).err().as_deref(),
            Some("ambiguous option: --ex could match --expand, --exclude")
        );
        assert_eq!(
            parse(&["-L", "x", "y"]).err().as_deref(),
            Some("argument -L/--limit: invalid int value: 'x'")
        );
        assert_eq!(
            parse(&["-x", "foo[", "y"]).err().as_deref(),
            Some("argument -x/--exclude: invalid Hostlist value: 'foo['")
        );
        assert_eq!(
            parse(&["a", "-e", "b"]).err().as_deref(),
            Some("unrecognized arguments: b")
        );
        assert_eq!(
            parse(&["-z", "a"]).err().as_deref(),
            Some("unrecognized arguments: -z")
        );
        // argparse 3.13+: an unknown letter in a cluster is left over
        assert_eq!(
            parse(&["-qz"]).err().as_deref(),
            Some("unrecognized arguments: -z")
        );
        assert_eq!(
            parse(&["-q=z"]).err().as_deref(),
            Some("argument -q/--quiet: ignored explicit argument 'z'")
        );
        assert_eq!(
            parse(&["--expand=1"]).err().as_deref(),
            Some("argument -e/--expand: ignored explicit argument '1'")
        );
        assert_eq!(parse(&["a", "-h"]).err().as_deref(), Some("HELP"));
        assert_eq!(
            parse(&["-n"]).err().as_deref(),
            Some("argument -n/--nth: expected one argument")
        );
        assert_eq!(parse(&["-L", " 1_0 "]).map(|a| a.limit), Ok(Some(10)));
    }

    #[test]
    fn jobid_detection() {
        for id in [
            "f1",
            "foo1",
            "fuzzy",
            "\u{192}2BdJfZ5",
            "job. ",
            "123",
            " 42",
            "+5",
            "0x1f",
            "1.2.3.4",
            "0000.0000.0000.0001",
            "...",
            "job.f1",
            "job.0000.0001.0000.0000",
        ] {
            assert!(is_jobid(id), "{id} should be a jobid");
        }
        for host in [
            "foo[1-3]",
            "host1",
            "fuzz100",
            "fluke1",
            "f",
            "f1-2",
            "-5",
            "1,2",
            "node1.cluster",
            "a.b.c.d.e",
            "0x",
            "0xg",
            "f1234567890123",
            "host",
            "",
            "10.0.0.256x",
            "[1-3]",
            "1 2",
            "   ",
            "job.",
        ] {
            assert!(!is_jobid(host), "{host} should not be a jobid");
        }
    }

    #[test]
    fn usage_wraps_like_argparse() {
        let u = usage();
        assert!(u.starts_with("usage: roster-hostlist [-h] [-e] [-d S] [-c] [-n [-]IDS]"));
        assert!(u.lines().all(|l| l.len() <= 78), "{u}");
        assert!(u.contains("[-i | -m | -X]"));
        assert!(u.trim_end().ends_with("[SOURCES ...]"));
        assert!(help().contains("SOURCES may include:"));
    }

    #[test]
    fn python_float_repr() {
        assert_eq!(py_float_repr(15.0), "15.0");
        assert_eq!(py_float_repr(0.1), "0.1");
        assert_eq!(py_float_repr(1e16), "1e+16");
        assert_eq!(py_float_repr(0.00001), "1e-05");
        assert_eq!(py_float_repr(2.5e-7), "2.5e-07");
        assert_eq!(py_float_repr(123456.5), "123456.5");
    }
}
