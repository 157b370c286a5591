//! Command-line parsing that behaves like CPython's `argparse` with flux's
//! help formatter (`flux.util.help_formatter()`), so that `roster
//! resource` and `roster hostlist` accept the same spellings as `flux
//! resource` and `flux hostlist` and fail with the same usage text,
//! message and exit status 2.
//!
//! Texts (usage wrapping, `-h` output, error messages) are CPython 3.11's,
//! at the terminal width `shutil.get_terminal_size()` would give
//! ([`terminal_columns`]).
//!
//! What is reproduced:
//!
//! * classification of each word as option or positional, with unique
//!   prefixes of long options (`--no-h`), `--opt=value`, `-ovalue`, short
//!   flag clusters (`-ff`, `-ni 0`), `--` and negative numbers;
//! * the regular-expression matching of positionals (`nargs` `None`, `?`,
//!   `*`, `REMAINDER`, and the sub-command `PARSER`), including REMAINDER
//!   swallowing later options;
//! * actions `store`, `store_true`, `count`, `append`, `help`, flux's
//!   `FilterActionSetUpdate` (comma split into a set) and sub-parsers;
//!   `type=` checks (`invalid int value: 'x'`); mutually exclusive groups
//!   (`not allowed with argument -e/--expand`, `[-i | -m | -X]` in the
//!   usage when the members are adjacent);
//! * the error texts (`expected one argument`, `invalid choice: 'x'
//!   (choose from 'a', 'b')`, `ambiguous option: --s could match ...`,
//!   `ignored explicit argument 'x'`, `the following arguments are
//!   required: ...`, `unrecognized arguments: ...` reported by the top
//!   parser), quoting with `repr()` ([`crate::repr::repr_str`]);
//! * usage wrapping (`HelpFormatter._format_usage`), `-h` output, a raw
//!   epilog.
//!
//! # Where parsing follows later CPython releases
//!
//! CPython 3.11 fails some valid command lines that later releases
//! (3.12.3 and 3.13) parse; the emulation keeps the working behaviour:
//!
//! * `--` is dropped only where it is the positional separator: an option
//!   value `--delimiter=--` is `--` (3.11 drops it and stores `[]`), and
//!   one value may sit between markers (`-d -- x` gives `x`);
//! * in a cluster of short flags, an unknown letter makes the rest of the
//!   word an unrecognized argument (`-qz`: `unrecognized arguments: -z`;
//!   3.11 says `ignored explicit argument 'z'`); `=` or `-` after a flag
//!   is an ignored explicit argument (`-e=S`, `-e-x`; 3.11 reads them as
//!   clusters); `=` separates a clustered option from its value
//!   (`-ed=,`).

use crate::repr::repr_str;
use crate::textwrap::{fill, wrap};
use std::collections::BTreeMap;

/// How many command-line words an argument takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nargs {
    /// Flags (`store_true`, `count`, `help`).
    Zero,
    /// Exactly one (`nargs=None`).
    One,
    /// `nargs='?'`.
    Optional,
    /// `nargs='*'` (positionals only).
    ZeroOrMore,
    /// `nargs=argparse.REMAINDER`.
    Remainder,
    /// The sub-command word and everything after it.
    Parser,
}

/// What an argument does with its words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// `store`
    Store,
    /// `store_true`
    StoreTrue,
    /// `count`
    Count,
    /// `append`
    Append,
    /// flux's `FilterActionSetUpdate`: split on commas, add to a set.
    SetUpdate,
    /// `-h/--help`
    Help,
    /// `add_subparsers()`
    Subparsers,
}

/// A parsed value (what the Python namespace would hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Val {
    /// `None`
    None,
    /// A string.
    Str(String),
    /// A boolean flag.
    Bool(bool),
    /// A counter.
    Int(u32),
    /// A list (REMAINDER, append) or an insertion-ordered set (SetUpdate).
    List(Vec<String>),
}

/// A `type=` conversion, as a test of whether a word converts.
pub type TypeCheck = fn(&str) -> bool;

/// One `add_argument()` call.
#[derive(Debug, Clone)]
pub struct Arg {
    dest: &'static str,
    opts: Vec<&'static str>,
    action: Action,
    nargs: Nargs,
    metavar: Option<&'static str>,
    choices: Vec<String>,
    konst: Option<&'static str>,
    default: Val,
    help: Option<&'static str>,
    required: bool,
    /// `type=`: the type's name (for `invalid NAME value: 'x'`) and
    /// whether a word converts.  The namespace keeps the word.
    check: Option<(&'static str, TypeCheck)>,
}

impl Arg {
    /// An argument with no default; a positional is required unless its
    /// `nargs` is `?` or `*` (as argparse decides).
    fn base(
        dest: &'static str,
        opts: &[&'static str],
        action: Action,
        nargs: Nargs,
        help: Option<&'static str>,
    ) -> Arg {
        Arg {
            dest,
            opts: opts.to_vec(),
            action,
            nargs,
            metavar: None,
            choices: Vec::new(),
            konst: None,
            default: Val::None,
            help,
            required: opts.is_empty() && !matches!(nargs, Nargs::Optional | Nargs::ZeroOrMore),
            check: None,
        }
    }

    fn with_default(mut self, default: Val) -> Arg {
        self.default = default;
        self
    }

    /// `action="store_true"`.
    pub fn flag(dest: &'static str, opts: &[&'static str], help: &'static str) -> Arg {
        Arg::base(dest, opts, Action::StoreTrue, Nargs::Zero, Some(help))
            .with_default(Val::Bool(false))
    }

    /// `action="count", default=0`.
    pub fn count(dest: &'static str, opts: &[&'static str], help: &'static str) -> Arg {
        Arg::base(dest, opts, Action::Count, Nargs::Zero, Some(help)).with_default(Val::Int(0))
    }

    /// An option taking one value (`store`).
    pub fn opt(dest: &'static str, opts: &[&'static str], help: &'static str) -> Arg {
        Arg::base(dest, opts, Action::Store, Nargs::One, Some(help))
    }

    /// `action="append", default=[]`.
    pub fn append(dest: &'static str, opts: &[&'static str], help: &'static str) -> Arg {
        Arg::base(dest, opts, Action::Append, Nargs::One, Some(help))
            .with_default(Val::List(Vec::new()))
    }

    /// flux's `action=FilterActionSetUpdate, default=set()`.
    pub fn set_update(dest: &'static str, opts: &[&'static str], help: &'static str) -> Arg {
        Arg::base(dest, opts, Action::SetUpdate, Nargs::One, Some(help))
            .with_default(Val::List(Vec::new()))
    }

    /// A required positional (`nargs=None`).
    pub fn pos(dest: &'static str, help: &'static str) -> Arg {
        Arg::base(dest, &[], Action::Store, Nargs::One, Some(help))
    }

    /// An optional positional (`nargs="?"`).
    pub fn pos_optional(dest: &'static str, help: &'static str) -> Arg {
        Arg::base(dest, &[], Action::Store, Nargs::Optional, Some(help))
    }

    /// `nargs=argparse.REMAINDER` (required, as argparse marks it).
    pub fn remainder(dest: &'static str, help: &'static str) -> Arg {
        Arg::base(dest, &[], Action::Store, Nargs::Remainder, Some(help))
    }

    /// A positional taking any number of words (`nargs="*"`): a list.
    pub fn pos_any(dest: &'static str, help: &'static str) -> Arg {
        Arg::base(dest, &[], Action::Store, Nargs::ZeroOrMore, Some(help))
            .with_default(Val::List(Vec::new()))
    }

    /// `type=NAME`: a value `check` rejects fails with
    /// `argument X: invalid NAME value: 'word'`.
    pub fn typed(mut self, name: &'static str, check: TypeCheck) -> Arg {
        self.check = Some((name, check));
        self
    }

    /// `metavar=`.
    pub fn metavar(mut self, m: &'static str) -> Arg {
        self.metavar = Some(m);
        self
    }

    /// `choices=`.
    pub fn choices(mut self, c: &[&str]) -> Arg {
        self.choices = c.iter().map(|s| s.to_string()).collect();
        self
    }

    /// `nargs="?", const=` for an option.
    pub fn optional_value(mut self, konst: &'static str) -> Arg {
        self.nargs = Nargs::Optional;
        self.konst = Some(konst);
        self
    }

    /// `default=` (a string).
    pub fn default_str(mut self, d: &str) -> Arg {
        self.default = Val::Str(d.to_string());
        self
    }

    /// `help=argparse.SUPPRESS`.
    pub fn hidden(mut self) -> Arg {
        self.help = None;
        self
    }

    fn is_positional(&self) -> bool {
        self.opts.is_empty()
    }

    /// `_get_action_name`.
    fn name(&self) -> String {
        if !self.opts.is_empty() {
            self.opts.join("/")
        } else if let Some(m) = self.metavar {
            m.to_string()
        } else {
            self.dest.to_string()
        }
    }
}

/// Read-only views, for generated documentation and shell completions.
impl Arg {
    /// `dest`.
    pub fn dest(&self) -> &'static str {
        self.dest
    }

    /// The option strings (`-f`, `--force`); empty for a positional.
    pub fn option_strings(&self) -> &[&'static str] {
        &self.opts
    }

    /// The action.
    pub fn action(&self) -> Action {
        self.action
    }

    /// `nargs`.
    pub fn nargs(&self) -> Nargs {
        self.nargs
    }

    /// `metavar=`, if given.
    pub fn metavar_text(&self) -> Option<&'static str> {
        self.metavar
    }

    /// `choices=`.
    pub fn choice_list(&self) -> &[String] {
        &self.choices
    }

    /// `help=`; `None` when suppressed ([`Arg::hidden`]).
    pub fn help_text(&self) -> Option<&'static str> {
        self.help
    }
}

/// An `ArgumentParser` (with flux's help formatter, `max_help_position=40`).
#[derive(Debug, Clone)]
pub struct Parser {
    prog: String,
    args: Vec<Arg>,
    subs: Vec<(&'static str, Parser)>,
    sub_title: Option<&'static str>,
    sub_description: Option<&'static str>,
    /// Mutually exclusive groups (indices into `args`).
    groups: Vec<Vec<usize>>,
    /// Text printed after the help, as is (`RawDescriptionHelpFormatter`).
    epilog: Option<&'static str>,
}

/// How parsing stopped without a namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// `-h`: print this on stdout and exit 0.
    Help(String),
    /// A usage error: print this on stderr and exit 2.
    Error(String),
}

/// The parsed namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Namespace {
    map: BTreeMap<&'static str, Val>,
}

impl Namespace {
    /// The value of `dest`.
    pub fn get(&self, dest: &str) -> &Val {
        self.map.get(dest).unwrap_or(&Val::None)
    }

    /// A string value (`None` when unset).
    pub fn str(&self, dest: &str) -> Option<&str> {
        match self.get(dest) {
            Val::Str(s) => Some(s),
            _ => None,
        }
    }

    /// A `store_true` flag.
    pub fn flag(&self, dest: &str) -> bool {
        matches!(self.get(dest), Val::Bool(true))
    }

    /// A `count` value.
    pub fn count(&self, dest: &str) -> u32 {
        match self.get(dest) {
            Val::Int(n) => *n,
            _ => 0,
        }
    }

    /// A list value (empty when unset).
    pub fn list(&self, dest: &str) -> &[String] {
        match self.get(dest) {
            Val::List(v) => v,
            _ => &[],
        }
    }

    fn set(&mut self, dest: &'static str, v: Val) {
        self.map.insert(dest, v);
    }
}

/// How one word was classified (`_parse_optional`).
#[derive(Debug, Clone)]
enum Word {
    /// 'A'
    Pos,
    /// '-' (a `--`)
    DashDash,
    /// 'O': the argument index (None if unknown), the option string
    /// matched, any explicit argument and whether an `=` preceded it.
    Opt(Option<usize>, String, Option<String>, bool),
}

impl Word {
    fn pattern_char(&self) -> char {
        match self {
            Word::Pos => 'A',
            Word::DashDash => '-',
            Word::Opt(..) => 'O',
        }
    }
}

/// argparse's `^-\d+$|^-\d*\.\d+$`.
fn looks_negative_number(s: &str) -> bool {
    let Some(rest) = s.strip_prefix('-') else {
        return false;
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if digits(rest) {
        return true;
    }
    match rest.split_once('.') {
        Some((a, b)) => a.bytes().all(|c| c.is_ascii_digit()) && digits(b),
        None => false,
    }
}

/// Does `pattern` (a string of A, O and -) match the nargs regex of
/// `nargs` at its start?  Returns the length matched.  Positional
/// patterns allow `-` markers around the arguments; option patterns do
/// not (argparse strips them).
fn nargs_match(nargs: Nargs, positional: bool, pattern: &[char]) -> Option<usize> {
    let dashes = |from: usize| -> usize {
        if !positional {
            return from;
        }
        let mut i = from;
        while pattern.get(i) == Some(&'-') {
            i += 1;
        }
        i
    };
    match nargs {
        Nargs::Zero => Some(0),
        Nargs::One => {
            let i = dashes(0);
            if pattern.get(i) == Some(&'A') {
                Some(dashes(i + 1))
            } else {
                None
            }
        }
        Nargs::Optional => {
            let i = dashes(0);
            if pattern.get(i) == Some(&'A') {
                Some(dashes(i + 1))
            } else {
                Some(i)
            }
        }
        Nargs::Remainder => Some(pattern.len()),
        Nargs::ZeroOrMore => Some(
            pattern
                .iter()
                .take_while(|&&c| c == 'A' || (positional && c == '-'))
                .count(),
        ),
        Nargs::Parser => {
            let i = dashes(0);
            if pattern.get(i) == Some(&'A') {
                Some(pattern.len())
            } else {
                None
            }
        }
    }
}

/// Match a sequence of positionals against a pattern as one regular
/// expression (greedy, with backtracking), returning the length each one
/// consumes, or None.
fn match_sequence(args: &[&Arg], pattern: &[char]) -> Option<Vec<usize>> {
    fn rec(args: &[&Arg], pattern: &[char], pos: usize, out: &mut Vec<usize>) -> bool {
        let Some((first, rest)) = args.split_first() else {
            return true;
        };
        let tail = pattern.get(pos..).unwrap_or(&[]);
        // candidate lengths, greedy first
        let mut candidates: Vec<usize> = Vec::new();
        match first.nargs {
            Nargs::Remainder => {
                candidates.extend((0..=tail.len()).rev());
            }
            Nargs::ZeroOrMore => {
                // ([-A]*)
                let run = tail.iter().take_while(|&&c| c == 'A' || c == '-').count();
                candidates.extend((0..=run).rev());
            }
            Nargs::Parser => {
                // (-*A[-AO]*)
                let mut i = 0;
                while tail.get(i) == Some(&'-') {
                    i += 1;
                }
                if tail.get(i) == Some(&'A') {
                    candidates.extend((i + 1..=tail.len()).rev());
                }
            }
            Nargs::One | Nargs::Optional | Nargs::Zero => {
                // (-*A-*) or (-*A?-*): enumerate dash runs around an optional A
                let mut lead = 0;
                while tail.get(lead) == Some(&'-') {
                    lead += 1;
                }
                let mut found: Vec<usize> = Vec::new();
                if tail.get(lead) == Some(&'A') && first.nargs != Nargs::Zero {
                    let mut trail = lead + 1;
                    while tail.get(trail) == Some(&'-') {
                        trail += 1;
                    }
                    for end in (lead + 1..=trail).rev() {
                        found.push(end);
                    }
                }
                if first.nargs != Nargs::One {
                    // no A: the leading dashes (greedy: all, then fewer)
                    for end in (0..=lead).rev() {
                        found.push(end);
                    }
                } else {
                    // backtracking over the leading dashes cannot help: A must follow them
                }
                candidates = found;
            }
        }
        for c in candidates {
            out.push(c);
            if rec(rest, pattern, pos + c, out) {
                return true;
            }
            out.pop();
        }
        false
    }
    let mut out = Vec::new();
    if rec(args, pattern, 0, &mut out) {
        Some(out)
    } else {
        None
    }
}

/// `shutil.get_terminal_size().columns` as argparse uses it: `$COLUMNS`,
/// else the size of the terminal on stdout, else 80.
pub fn terminal_columns(env_columns: Option<&str>, stdout_columns: Option<usize>) -> usize {
    let from_env = env_columns
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&n| n > 0);
    match from_env {
        Some(n) => usize::try_from(n).unwrap_or(80),
        None => stdout_columns.unwrap_or(80),
    }
}

impl Parser {
    /// A parser with only `-h/--help`.
    pub fn new(prog: &str) -> Parser {
        let help = Some("show this help message and exit");
        let help = Arg::base("help", &["-h", "--help"], Action::Help, Nargs::Zero, help);
        Parser {
            prog: prog.to_string(),
            args: vec![help],
            subs: Vec::new(),
            sub_title: None,
            sub_description: None,
            groups: Vec::new(),
            epilog: None,
        }
    }

    /// `add_argument()`.
    pub fn arg(mut self, a: Arg) -> Parser {
        self.args.push(a);
        self
    }

    /// `add_mutually_exclusive_group()` holding the arguments already added
    /// with these `dest`s (an unknown `dest` is left out).
    pub fn exclusive(mut self, dests: &[&str]) -> Parser {
        let members: Vec<usize> = dests
            .iter()
            .filter_map(|d| self.args.iter().position(|a| a.dest == *d))
            .collect();
        self.groups.push(members);
        self
    }

    /// `epilog=` (printed after the help without re-wrapping).
    pub fn epilog(mut self, text: &'static str) -> Parser {
        self.epilog = Some(text);
        self
    }

    /// `add_subparsers(title=, description=, dest=)` with `required=True`.
    pub fn subparsers(
        mut self,
        title: &'static str,
        description: &'static str,
        dest: &'static str,
    ) -> Parser {
        self.args.push(Arg::base(
            dest,
            &[],
            Action::Subparsers,
            Nargs::Parser,
            None,
        ));
        self.sub_title = Some(title);
        self.sub_description = Some(description);
        self
    }

    /// `add_parser(name)`: the new parser's prog is this one's followed by
    /// the name; `build` adds its arguments.
    pub fn sub(mut self, name: &'static str, build: impl FnOnce(Parser) -> Parser) -> Parser {
        let p = build(Parser::new(&format!("{} {name}", self.prog)));
        self.subs.push((name, p));
        let names: Vec<String> = self.subs.iter().map(|(n, _)| n.to_string()).collect();
        if let Some(a) = self
            .args
            .iter_mut()
            .find(|a| a.action == Action::Subparsers)
        {
            a.choices = names;
        }
        self
    }

    /// `prog`.
    pub fn prog(&self) -> &str {
        &self.prog
    }

    /// The arguments in registration order (`-h/--help` first).
    pub fn arguments(&self) -> &[Arg] {
        &self.args
    }

    /// The sub-parsers in registration order.
    pub fn subparsers_list(&self) -> impl Iterator<Item = (&'static str, &Parser)> {
        self.subs.iter().map(|(n, p)| (*n, p))
    }

    /// The sub-parser called `name`.
    pub fn subparser(&self, name: &str) -> Option<&Parser> {
        self.subs.iter().find(|(n, _)| *n == name).map(|(_, p)| p)
    }

    fn find_exact(&self, s: &str) -> Option<usize> {
        self.args.iter().position(|a| a.opts.contains(&s))
    }

    /// All option strings in registration order (`_option_string_actions`).
    fn option_strings(&self) -> Vec<(usize, &'static str)> {
        let mut v = Vec::new();
        for (i, a) in self.args.iter().enumerate() {
            for o in &a.opts {
                v.push((i, *o));
            }
        }
        v
    }

    /// `_parse_optional`.
    fn classify(&self, arg: &str) -> Result<Word, String> {
        if arg.is_empty() || !arg.starts_with('-') {
            return Ok(Word::Pos);
        }
        if let Some(i) = self.find_exact(arg) {
            return Ok(Word::Opt(Some(i), arg.to_string(), None, false));
        }
        if arg.chars().count() == 1 {
            return Ok(Word::Pos);
        }
        if let Some((o, v)) = arg.split_once('=') {
            if let Some(i) = self.find_exact(o) {
                return Ok(Word::Opt(Some(i), o.to_string(), Some(v.to_string()), true));
            }
        }
        // _get_option_tuples
        let mut tuples: Vec<(usize, &'static str, Option<String>, bool)> = Vec::new();
        if arg.starts_with("--") {
            let (prefix, explicit) = match arg.split_once('=') {
                Some((p, v)) => (p, Some(v.to_string())),
                None => (arg, None),
            };
            let sep = explicit.is_some();
            for (i, o) in self.option_strings() {
                if o.starts_with(prefix) {
                    tuples.push((i, o, explicit.clone(), sep));
                }
            }
        } else {
            let short: String = arg.chars().take(2).collect();
            let rest: String = arg.chars().skip(2).collect();
            for (i, o) in self.option_strings() {
                if o == short {
                    tuples.push((i, o, Some(rest.clone()), false));
                } else if o.starts_with(arg) {
                    tuples.push((i, o, None, false));
                }
            }
        }
        if tuples.len() > 1 {
            let names: Vec<&str> = tuples.iter().map(|t| t.1).collect();
            return Err(format!(
                "ambiguous option: {arg} could match {}",
                names.join(", ")
            ));
        }
        if let Some((i, o, x, sep)) = tuples.pop() {
            return Ok(Word::Opt(Some(i), o.to_string(), x, sep));
        }
        if looks_negative_number(arg) {
            return Ok(Word::Pos);
        }
        if arg.contains(' ') {
            return Ok(Word::Pos);
        }
        Ok(Word::Opt(None, arg.to_string(), None, false))
    }

    /// `parse_args()`: a namespace, or what to print and how to exit.
    pub fn parse(&self, words: &[String], width: usize) -> Result<Namespace, Stop> {
        let mut ns = Namespace::default();
        let extras = self.parse_known(words, &mut ns, width)?;
        if !extras.is_empty() {
            return Err(self.error(
                &format!("unrecognized arguments: {}", extras.join(" ")),
                width,
            ));
        }
        Ok(ns)
    }

    /// `self.error(msg)`: usage, then `prog: error: msg`.
    pub fn error(&self, msg: &str, width: usize) -> Stop {
        Stop::Error(format!(
            "{}{}: error: {msg}\n",
            self.format_usage(width),
            self.prog
        ))
    }

    fn arg_error(&self, a: &Arg, msg: &str, width: usize) -> Stop {
        self.error(&format!("argument {}: {msg}", a.name()), width)
    }

    /// `parse_known_args`: fills `ns`, returns the unrecognized words.
    fn parse_known(
        &self,
        words: &[String],
        ns: &mut Namespace,
        width: usize,
    ) -> Result<Vec<String>, Stop> {
        for a in &self.args {
            if a.action != Action::Help {
                ns.set(a.dest, a.default.clone());
            }
        }
        // classify every word first (ambiguity errors come first)
        let mut classes: Vec<Word> = Vec::with_capacity(words.len());
        let mut rest_positional = false;
        for w in words {
            if rest_positional {
                classes.push(Word::Pos);
            } else if w == "--" {
                classes.push(Word::DashDash);
                rest_positional = true;
            } else {
                classes.push(self.classify(w).map_err(|m| self.error(&m, width))?);
            }
        }
        let pattern: Vec<char> = classes.iter().map(Word::pattern_char).collect();
        let option_indices: Vec<usize> = classes
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c, Word::Opt(..)))
            .map(|(i, _)| i)
            .collect();

        let mut st = ParseState {
            seen: vec![false; self.args.len()],
            non_default: vec![false; self.args.len()],
            extras: Vec::new(),
        };
        let mut positionals: Vec<usize> = self
            .args
            .iter()
            .enumerate()
            .filter(|(_, a)| a.is_positional())
            .map(|(i, _)| i)
            .collect();

        let max_opt = option_indices.iter().copied().max();
        let mut start = 0usize;
        if let Some(max_opt) = max_opt {
            while start <= max_opt {
                let next_opt = option_indices
                    .iter()
                    .copied()
                    .filter(|&i| i >= start)
                    .min()
                    .unwrap_or(max_opt);
                if start != next_opt {
                    let end = self.consume_positionals(
                        start,
                        words,
                        &pattern,
                        &mut positionals,
                        ns,
                        &mut st,
                        width,
                    )?;
                    if end > start {
                        start = end;
                        continue;
                    }
                    start = end;
                }
                if !option_indices.contains(&start) {
                    if let Some(chunk) = words.get(start..next_opt) {
                        st.extras.extend(chunk.iter().cloned());
                    }
                    start = next_opt;
                }
                start =
                    self.consume_optional(start, words, &classes, &pattern, ns, &mut st, width)?;
            }
        }
        let stop =
            self.consume_positionals(start, words, &pattern, &mut positionals, ns, &mut st, width)?;
        if let Some(rest) = words.get(stop..) {
            st.extras.extend(rest.iter().cloned());
        }
        let missing: Vec<String> = self
            .args
            .iter()
            .zip(st.seen.iter())
            .filter(|(a, seen)| a.required && !**seen)
            .map(|(a, _)| a.name())
            .collect();
        if !missing.is_empty() {
            return Err(self.error(
                &format!(
                    "the following arguments are required: {}",
                    missing.join(", ")
                ),
                width,
            ));
        }
        Ok(st.extras)
    }

    #[allow(clippy::too_many_arguments)]
    fn consume_optional(
        &self,
        start: usize,
        words: &[String],
        classes: &[Word],
        pattern: &[char],
        ns: &mut Namespace,
        st: &mut ParseState,
        width: usize,
    ) -> Result<usize, Stop> {
        let Some(Word::Opt(idx, optstr, explicit, sep)) = classes.get(start).cloned() else {
            return Ok(start + 1);
        };
        let Some(mut idx) = idx else {
            if let Some(w) = words.get(start) {
                st.extras.push(w.clone());
            }
            return Ok(start + 1);
        };
        let mut optstr = optstr;
        let mut explicit = explicit;
        let mut sep = sep;
        let mut todo: Vec<(usize, Vec<String>)> = Vec::new();
        let stop;
        loop {
            let Some(a) = self.args.get(idx) else {
                return Ok(start + 1);
            };
            match explicit.take() {
                Some(x) => {
                    let count = if a.nargs == Nargs::Zero { 0 } else { 1 };
                    let single_dash = !optstr.starts_with("--");
                    if count == 0 && single_dash && !x.is_empty() {
                        let ignored = || {
                            self.arg_error(
                                a,
                                &format!("ignored explicit argument {}", repr_str(&x)),
                                width,
                            )
                        };
                        // `-e=S` and `-e-S` are not clusters (CPython 3.12.3+)
                        if sep || x.starts_with('-') {
                            return Err(ignored());
                        }
                        todo.push((idx, Vec::new()));
                        let mut chars = x.chars();
                        let c = chars.next().unwrap_or('-');
                        let rest: String = chars.collect();
                        let next = format!("-{c}");
                        match self.find_exact(&next) {
                            Some(j) => {
                                idx = j;
                                optstr = next;
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
                                // an unknown letter: the rest of the word is
                                // an unrecognized argument (CPython 3.12.3+)
                                st.extras.push(format!("-{x}"));
                                stop = start + 1;
                                break;
                            }
                        }
                    } else if count == 1 {
                        todo.push((idx, vec![x]));
                        stop = start + 1;
                        break;
                    } else {
                        return Err(self.arg_error(
                            a,
                            &format!("ignored explicit argument {}", repr_str(&x)),
                            width,
                        ));
                    }
                }
                None => {
                    let from = start + 1;
                    let tail = pattern.get(from..).unwrap_or(&[]);
                    // one value may sit between `--` markers (`-d -- x`)
                    let dashes = a.nargs == Nargs::One;
                    let n = match nargs_match(a.nargs, dashes, tail) {
                        Some(n) => n,
                        None => {
                            let msg = match a.nargs {
                                Nargs::Optional => "expected at most one argument",
                                _ => "expected one argument",
                            };
                            return Err(self.arg_error(a, msg, width));
                        }
                    };
                    todo.push((idx, without_markers(words, pattern, from, n, true)));
                    stop = from + n;
                    break;
                }
            }
        }
        for (i, args) in todo {
            self.take_action(i, args, ns, st, width)?;
        }
        Ok(stop)
    }

    #[allow(clippy::too_many_arguments)]
    fn consume_positionals(
        &self,
        start: usize,
        words: &[String],
        pattern: &[char],
        positionals: &mut Vec<usize>,
        ns: &mut Namespace,
        st: &mut ParseState,
        width: usize,
    ) -> Result<usize, Stop> {
        let tail = pattern.get(start..).unwrap_or(&[]);
        let mut counts: Vec<usize> = Vec::new();
        for k in (1..=positionals.len()).rev() {
            let slice: Vec<&Arg> = positionals
                .iter()
                .take(k)
                .filter_map(|&i| self.args.get(i))
                .collect();
            if let Some(c) = match_sequence(&slice, tail) {
                counts = c;
                break;
            }
        }
        let mut pos = start;
        let taken: Vec<usize> = positionals.iter().take(counts.len()).copied().collect();
        for (i, n) in taken.iter().zip(counts.iter()) {
            let keep_markers = self
                .args
                .get(*i)
                .is_some_and(|a| matches!(a.nargs, Nargs::Remainder | Nargs::Parser));
            let args = if keep_markers {
                words.get(pos..pos + n).unwrap_or(&[]).to_vec()
            } else {
                without_markers(words, pattern, pos, *n, false)
            };
            pos += n;
            self.take_action(*i, args, ns, st, width)?;
        }
        positionals.drain(..counts.len());
        Ok(pos)
    }

    fn check_choice(&self, a: &Arg, v: &str, width: usize) -> Result<(), Stop> {
        if a.choices.is_empty() || a.choices.iter().any(|c| c == v) {
            return Ok(());
        }
        let choices: Vec<String> = a.choices.iter().map(|c| repr_str(c)).collect();
        Err(self.arg_error(
            a,
            &format!(
                "invalid choice: {} (choose from {})",
                repr_str(v),
                choices.join(", ")
            ),
            width,
        ))
    }

    fn take_action(
        &self,
        idx: usize,
        args: Vec<String>,
        ns: &mut Namespace,
        st: &mut ParseState,
        width: usize,
    ) -> Result<(), Stop> {
        let Some(a) = self.args.get(idx) else {
            return Ok(());
        };
        if let Some(s) = st.seen.get_mut(idx) {
            *s = true;
        }
        // `_get_values`: type conversion first
        if let Some((type_name, check)) = a.check {
            if matches!(a.action, Action::Store | Action::Append) {
                if let Some(bad) = args.iter().find(|w| !check(w)) {
                    return Err(self.arg_error(
                        a,
                        &format!("invalid {type_name} value: {}", repr_str(bad)),
                        width,
                    ));
                }
            }
        }
        // then conflicts with members of its mutually exclusive groups seen
        // with a value other than the default
        let uses_default = a.is_positional() && args.is_empty();
        if !uses_default {
            if let Some(s) = st.non_default.get_mut(idx) {
                *s = true;
            }
            for g in self.groups.iter().filter(|g| g.contains(&idx)) {
                let other = g
                    .iter()
                    .find(|&&j| j != idx && st.non_default.get(j).copied().unwrap_or(false));
                if let Some(o) = other.and_then(|&j| self.args.get(j)) {
                    return Err(self.arg_error(
                        a,
                        &format!("not allowed with argument {}", o.name()),
                        width,
                    ));
                }
            }
        }
        match a.action {
            Action::Help => Err(Stop::Help(self.format_help(width))),
            Action::StoreTrue => {
                ns.set(a.dest, Val::Bool(true));
                Ok(())
            }
            Action::Count => {
                let n = match ns.get(a.dest) {
                    Val::Int(n) => *n,
                    _ => 0,
                };
                ns.set(a.dest, Val::Int(n.saturating_add(1)));
                Ok(())
            }
            Action::Store => {
                let v = match a.nargs {
                    Nargs::Remainder | Nargs::ZeroOrMore => Val::List(args),
                    Nargs::Optional if args.is_empty() => {
                        let v = if a.is_positional() {
                            a.default.clone()
                        } else {
                            a.konst.map_or(Val::None, |k| Val::Str(k.to_string()))
                        };
                        if let Val::Str(s) = &v {
                            self.check_choice(a, s, width)?;
                        }
                        v
                    }
                    _ => {
                        let s = args.into_iter().next().unwrap_or_default();
                        self.check_choice(a, &s, width)?;
                        Val::Str(s)
                    }
                };
                ns.set(a.dest, v);
                Ok(())
            }
            Action::Append => {
                let s = args.into_iter().next().unwrap_or_default();
                self.check_choice(a, &s, width)?;
                let mut list = ns.list(a.dest).to_vec();
                list.push(s);
                ns.set(a.dest, Val::List(list));
                Ok(())
            }
            Action::SetUpdate => {
                let s = args.into_iter().next().unwrap_or_default();
                let mut list = ns.list(a.dest).to_vec();
                for part in s.split(',') {
                    if !list.iter().any(|x| x == part) {
                        list.push(part.to_string());
                    }
                }
                ns.set(a.dest, Val::List(list));
                Ok(())
            }
            Action::Subparsers => {
                let mut it = args.into_iter();
                let name = it.next().unwrap_or_default();
                self.check_choice(a, &name, width)?;
                ns.set(a.dest, Val::Str(name.clone()));
                let rest: Vec<String> = it.collect();
                let Some(sub) = self.subparser(&name) else {
                    return Ok(());
                };
                let mut subns = Namespace::default();
                let extras = sub.parse_known(&rest, &mut subns, width)?;
                for (k, v) in subns.map {
                    ns.set(k, v);
                }
                st.extras.extend(extras);
                Ok(())
            }
        }
    }

    // ------------------------------------------------------------ formatting

    /// `_metavar_formatter(action, default)(1)`.
    fn metavar_text(a: &Arg, default: &str) -> String {
        if let Some(m) = a.metavar {
            m.to_string()
        } else if !a.choices.is_empty() {
            format!("{{{}}}", a.choices.join(","))
        } else {
            default.to_string()
        }
    }

    /// `_format_args(action, default)`.
    fn format_args(a: &Arg, default: &str) -> String {
        let m = Parser::metavar_text(a, default);
        match a.nargs {
            Nargs::Zero => String::new(),
            Nargs::One => m,
            Nargs::Optional => format!("[{m}]"),
            Nargs::ZeroOrMore => format!("[{m} ...]"),
            Nargs::Remainder => "...".into(),
            Nargs::Parser => format!("{m} ..."),
        }
    }

    /// One argument's part of the usage line.
    fn usage_part(a: &Arg, in_group: bool) -> Option<String> {
        if a.help.is_none() && a.action != Action::Subparsers {
            return None;
        }
        if a.is_positional() {
            let part = Parser::format_args(a, a.dest);
            return Some(part);
        }
        let first = a.opts.first().copied().unwrap_or("");
        let part = if a.nargs == Nargs::Zero {
            first.to_string()
        } else {
            format!("{first} {}", Parser::format_args(a, &a.dest.to_uppercase()))
        };
        Some(if a.required || in_group {
            part
        } else {
            format!("[{part}]")
        })
    }

    /// `_format_actions_usage` for a list of arguments (indices into
    /// `args`): a mutually exclusive group whose members are adjacent in
    /// the list is shown as `[-a | -b]`, otherwise its members are shown
    /// one by one.
    fn actions_usage(&self, idxs: &[usize]) -> String {
        let mut inserts: BTreeMap<usize, String> = BTreeMap::new();
        let mut grouped: Vec<usize> = Vec::new();
        for g in &self.groups {
            let Some(first) = g.first() else {
                continue;
            };
            let Some(start) = idxs.iter().position(|i| i == first) else {
                continue;
            };
            let end = start + g.len();
            if idxs.get(start..end) != Some(g.as_slice()) {
                continue;
            }
            grouped.extend(g.iter().copied());
            inserts
                .entry(start)
                .and_modify(|s| s.push_str(" ["))
                .or_insert_with(|| "[".into());
            inserts
                .entry(end)
                .and_modify(|s| s.push(']'))
                .or_insert_with(|| "]".into());
            for i in start + 1..end {
                inserts.insert(i, "|".into());
            }
        }
        let mut parts: Vec<String> = Vec::new();
        for (k, i) in idxs.iter().enumerate() {
            if let Some(ins) = inserts.get(&k) {
                parts.push(ins.clone());
            }
            let part = self
                .args
                .get(*i)
                .and_then(|a| Parser::usage_part(a, grouped.contains(i)));
            if let Some(p) = part {
                parts.push(p);
            }
        }
        if let Some(ins) = inserts.get(&idxs.len()) {
            parts.push(ins.clone());
        }
        let text = parts.join(" ");
        // the cleanup regexes: "[ " -> "[", " ]" -> "]", drop "[]"/"()"
        let mut t = text.replace("[ ", "[").replace("( ", "(");
        t = t.replace(" ]", "]").replace(" )", ")");
        t = t.replace("[]", "").replace("()", "");
        t.trim().to_string()
    }

    /// Split a usage string like `_re.findall(part_regexp, text)`.
    fn usage_parts(text: &str) -> Vec<String> {
        let chars: Vec<char> = text.chars().collect();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let c = chars.get(i).copied().unwrap_or(' ');
            if c.is_whitespace() {
                i += 1;
                continue;
            }
            let mut matched = None;
            for (open, close) in [('(', ')'), ('[', ']')] {
                if c != open || matched.is_some() {
                    continue;
                }
                let mut k = i + 1;
                while k < chars.len() {
                    if chars.get(k) == Some(&close) {
                        let mut e = k;
                        while chars.get(e + 1) == Some(&close) {
                            e += 1;
                        }
                        let after = chars.get(e + 1);
                        if after.is_none() || after.is_some_and(|x| x.is_whitespace()) {
                            matched = Some(e + 1);
                            break;
                        }
                    }
                    k += 1;
                }
            }
            let end = match matched {
                Some(e) => e,
                None => {
                    let mut e = i;
                    while e < chars.len() && !chars.get(e).is_some_and(|x| x.is_whitespace()) {
                        e += 1;
                    }
                    e
                }
            };
            parts.push(chars.get(i..end).unwrap_or(&[]).iter().collect());
            i = end;
        }
        parts
    }

    /// The `usage: ...` text (with its final newline), wrapped for a
    /// formatter of `width` columns (`get_terminal_size().columns - 2`).
    pub fn format_usage(&self, columns: usize) -> String {
        let width = columns.saturating_sub(2);
        format!("usage: {}\n", self.usage_body(width))
    }

    fn usage_body(&self, width: usize) -> String {
        let prefix = "usage: ";
        let prog = self.prog.as_str();
        let indices = |positional: bool| -> Vec<usize> {
            (0..self.args.len())
                .filter(|&i| {
                    self.args
                        .get(i)
                        .is_some_and(|a| a.is_positional() == positional)
                })
                .collect()
        };
        let optionals = indices(false);
        let positionals = indices(true);
        let all: Vec<usize> = optionals
            .iter()
            .chain(positionals.iter())
            .copied()
            .collect();
        let action_usage = self.actions_usage(&all);
        let usage = [prog, action_usage.as_str()]
            .iter()
            .filter(|s| !s.is_empty())
            .copied()
            .collect::<Vec<_>>()
            .join(" ");
        let text_width = width;
        if prefix.len() + usage.chars().count() <= text_width {
            return usage;
        }
        let opt_parts = Parser::usage_parts(&self.actions_usage(&optionals));
        let pos_parts = Parser::usage_parts(&self.actions_usage(&positionals));
        let get_lines = |parts: &[String], indent: &str, prefix: Option<&str>| -> Vec<String> {
            let mut lines: Vec<String> = Vec::new();
            let mut line: Vec<&str> = Vec::new();
            let mut line_len = match prefix {
                Some(p) => p.len() as isize - 1,
                None => indent.len() as isize - 1,
            };
            for part in parts {
                let plen = part.chars().count() as isize;
                if line_len + 1 + plen > text_width as isize && !line.is_empty() {
                    lines.push(format!("{indent}{}", line.join(" ")));
                    line.clear();
                    line_len = indent.len() as isize - 1;
                }
                line.push(part);
                line_len += plen + 1;
            }
            if !line.is_empty() {
                lines.push(format!("{indent}{}", line.join(" ")));
            }
            if prefix.is_some() {
                if let Some(l) = lines.first_mut() {
                    *l = l.get(indent.len()..).unwrap_or("").to_string();
                }
            }
            lines
        };
        let lines: Vec<String> = if (prefix.len() + prog.chars().count()) as f64
            <= 0.75 * text_width as f64
        {
            let indent = " ".repeat(prefix.len() + prog.chars().count() + 1);
            if !opt_parts.is_empty() {
                let mut first = vec![prog.to_string()];
                first.extend(opt_parts.iter().cloned());
                let mut l = get_lines(&first, &indent, Some(prefix));
                l.extend(get_lines(&pos_parts, &indent, None));
                l
            } else if !pos_parts.is_empty() {
                let mut first = vec![prog.to_string()];
                first.extend(pos_parts.iter().cloned());
                get_lines(&first, &indent, Some(prefix))
            } else {
                vec![prog.to_string()]
            }
        } else {
            let indent = " ".repeat(prefix.len());
            let parts: Vec<String> = opt_parts.iter().chain(pos_parts.iter()).cloned().collect();
            let mut l = get_lines(&parts, &indent, None);
            if l.len() > 1 {
                l = get_lines(&opt_parts, &indent, None);
                l.extend(get_lines(&pos_parts, &indent, None));
            }
            let mut v = vec![prog.to_string()];
            v.extend(l);
            v
        };
        lines.join("\n")
    }

    /// flux's `_format_action_invocation`.
    fn invocation(a: &Arg) -> String {
        if a.is_positional() {
            return Parser::metavar_text(a, a.dest);
        }
        let mut s = a.opts.join(", ");
        if a.opts.len() == 1 && a.opts.first().is_some_and(|o| o.len() > 2) {
            s = format!("    {s}");
        }
        if a.nargs == Nargs::Zero {
            return s;
        }
        format!("{s}={}", Parser::format_args(a, &a.dest.to_uppercase()))
    }

    /// The `-h` text.
    pub fn format_help(&self, columns: usize) -> String {
        let width = columns.saturating_sub(2);
        let max_help_position = 40usize.min(width.saturating_sub(20).max(4));
        let shown: Vec<&Arg> = self
            .args
            .iter()
            .filter(|a| a.help.is_some() || a.action == Action::Subparsers)
            .collect();
        let max_len = shown
            .iter()
            .map(|a| Parser::invocation(a).chars().count() + 2)
            .max()
            .unwrap_or(0);
        let help_position = (max_len + 2).min(max_help_position);
        let help_width = width.saturating_sub(help_position).max(11);
        let action_width = help_position.saturating_sub(4);
        let format_action = |a: &Arg| -> String {
            let header = Parser::invocation(a);
            let mut out = String::new();
            let help = a.help.filter(|h| !h.trim().is_empty());
            let indent_first = match help {
                None => {
                    out.push_str(&format!("  {header}\n"));
                    return out;
                }
                Some(_) if header.chars().count() <= action_width => {
                    out.push_str(&format!("  {header:<action_width$}  "));
                    0
                }
                Some(_) => {
                    out.push_str(&format!("  {header}\n"));
                    help_position
                }
            };
            let text = help.unwrap_or("");
            let lines = wrap(text, help_width);
            let mut first = true;
            for l in lines {
                if first {
                    out.push_str(&format!("{:indent_first$}{l}\n", ""));
                    first = false;
                } else {
                    out.push_str(&format!("{:help_position$}{l}\n", ""));
                }
            }
            out
        };
        let section = |title: &str, description: Option<&str>, args: &[&Arg]| -> String {
            let mut items = String::new();
            if let Some(d) = description {
                items.push_str(&fill(d, width.saturating_sub(2).max(11), "  "));
                items.push_str("\n\n");
            }
            for a in args {
                items.push_str(&format_action(a));
            }
            if items.is_empty() {
                return String::new();
            }
            format!("\n{title}:\n{items}\n")
        };
        let positionals: Vec<&Arg> = self
            .args
            .iter()
            .filter(|a| a.is_positional() && a.help.is_some() && a.action != Action::Subparsers)
            .collect();
        let optionals: Vec<&Arg> = self
            .args
            .iter()
            .filter(|a| !a.is_positional() && a.help.is_some())
            .collect();
        let subs: Vec<&Arg> = self
            .args
            .iter()
            .filter(|a| a.action == Action::Subparsers)
            .collect();
        let mut out = format!("usage: {}\n\n", self.usage_body(width));
        out.push_str(&section("positional arguments", None, &positionals));
        out.push_str(&section("options", None, &optionals));
        if let Some(title) = self.sub_title {
            out.push_str(&section(title, self.sub_description, &subs));
        }
        if let Some(e) = self.epilog {
            out.push_str(e);
            out.push_str("\n\n");
        }
        // collapse runs of blank lines, strip, end with one newline
        let mut collapsed = String::new();
        let mut newlines = 0;
        for c in out.chars() {
            if c == '\n' {
                newlines += 1;
                continue;
            }
            if newlines > 0 {
                collapsed.push_str(if newlines >= 2 { "\n\n" } else { "\n" });
                newlines = 0;
            }
            collapsed.push(c);
        }
        let trimmed = collapsed.trim_matches('\n');
        format!("{trimmed}\n")
    }
}

struct ParseState {
    seen: Vec<bool>,
    non_default: Vec<bool>,
    extras: Vec<String>,
}

/// `words[from..from + n]` without the `--` marker words (pattern `-`):
/// all of them, or only the first (what argparse strips from a
/// positional's words).
fn without_markers(
    words: &[String],
    pattern: &[char],
    from: usize,
    n: usize,
    all: bool,
) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    let mut dropped = false;
    for k in from..from + n {
        if pattern.get(k) == Some(&'-') && (all || !dropped) {
            dropped = true;
            continue;
        }
        if let Some(w) = words.get(k) {
            out.push(w.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn negative_numbers() {
        assert!(looks_negative_number("-1"));
        assert!(looks_negative_number("-.5"));
        assert!(looks_negative_number("-1.5"));
        assert!(!looks_negative_number("-a"));
        assert!(!looks_negative_number("-1."));
    }

    #[test]
    fn usage_part_splitting() {
        assert_eq!(
            Parser::usage_parts("[-h] [-L [WHEN]] [targets] ..."),
            vec!["[-h]", "[-L [WHEN]]", "[targets]", "..."]
        );
        assert_eq!(Parser::usage_parts("{a,b} ..."), vec!["{a,b}", "..."]);
    }

    fn demo() -> Parser {
        Parser::new("prog")
            .arg(Arg::opt("uri", &["--uri"], "u").metavar("URI"))
            .subparsers("subcommands", "", "subcommand")
            .sub("drain", |p| {
                p.arg(Arg::count("force", &["-f", "--force"], "f"))
                    .arg(Arg::flag("update", &["-u", "--update"], "u"))
                    .arg(
                        Arg::opt("color", &["-L", "--color"], "c")
                            .metavar("WHEN")
                            .choices(&["never", "always", "auto"])
                            .optional_value("always")
                            .default_str("auto"),
                    )
                    .arg(Arg::pos_optional("targets", "t"))
                    .arg(Arg::remainder("reason", "r"))
            })
            .sub("undrain", |p| {
                p.arg(Arg::pos("targets", "t"))
                    .arg(Arg::remainder("reason", "r"))
            })
    }

    #[test]
    fn remainder_swallows_options() {
        let ns = demo()
            .parse(&words("drain -ff 1 a b -u"), 80)
            .unwrap_or_default();
        assert_eq!(ns.count("force"), 2);
        assert_eq!(ns.str("targets"), Some("1"));
        assert_eq!(ns.list("reason"), ["a", "b", "-u"]);
        assert!(!ns.flag("update"));
        let ns = demo().parse(&words("drain"), 80).unwrap_or_default();
        assert_eq!(ns.str("targets"), None);
        assert_eq!(ns.str("color"), Some("auto"));
        let ns = demo().parse(&words("drain -L"), 80).unwrap_or_default();
        assert_eq!(ns.str("color"), Some("always"));
        let ns = demo()
            .parse(&words("--uri x drain -fuLnever"), 80)
            .unwrap_or_default();
        assert_eq!(ns.str("uri"), Some("x"));
        assert_eq!(ns.str("color"), Some("never"));
        assert!(ns.flag("update"));
    }

    #[test]
    fn errors() {
        let e = demo().parse(&words("undrain"), 80);
        assert_eq!(
            e,
            Err(Stop::Error(
                "usage: prog undrain [-h] targets ...\nprog undrain: error: the following arguments are required: targets, reason\n".into()
            ))
        );
        let e = demo().parse(&words("drain --force=2"), 80);
        assert!(
            matches!(e, Err(Stop::Error(ref s)) if s.ends_with("error: argument -f/--force: ignored explicit argument '2'\n"))
        );
        let e = demo().parse(&words("drain -L 1"), 80);
        assert!(
            matches!(e, Err(Stop::Error(ref s)) if s.ends_with("error: argument -L/--color: invalid choice: '1' (choose from 'never', 'always', 'auto')\n"))
        );
        let e = demo().parse(&words("bogus"), 80);
        assert!(
            matches!(e, Err(Stop::Error(ref s)) if s.ends_with("prog: error: argument subcommand: invalid choice: 'bogus' (choose from 'drain', 'undrain')\n"))
        );
        let e = demo().parse(&words("undrain 1 --x"), 80);
        assert!(e.is_ok());
        let e = demo().parse(&words("drain -x"), 80);
        assert!(
            matches!(e, Err(Stop::Error(ref s)) if s.starts_with("usage: prog [-h] [--uri URI]") && s.ends_with("prog: error: unrecognized arguments: -x\n"))
        );
    }

    fn hl() -> Parser {
        Parser::new("hl")
            .arg(Arg::flag("expand", &["-e", "--expand"], "e"))
            .arg(Arg::opt("delimiter", &["-d", "--delimiter"], "d").metavar("S"))
            .arg(Arg::flag("count", &["-c", "--count"], "c"))
            .arg(
                Arg::opt("limit", &["-L", "--limit"], "l")
                    .metavar("N")
                    .typed("int", |w| w.trim().parse::<i64>().is_ok()),
            )
            .arg(Arg::flag("i", &["-i"], "i"))
            .arg(Arg::flag("m", &["-m"], "m"))
            .arg(Arg::pos_any("sources", "s").metavar("SOURCES"))
            .exclusive(&["expand", "count"])
            .exclusive(&["i", "m"])
            .epilog("raw\n  text\n")
    }

    fn err_line(r: Result<Namespace, Stop>) -> String {
        match r {
            Err(Stop::Error(t)) => t.lines().last().unwrap_or_default().to_string(),
            other => format!("{other:?}"),
        }
    }

    fn hl_err(args: &str) -> String {
        err_line(hl().parse(&words(args), 80))
    }

    #[test]
    fn groups_types_and_zero_or_more() {
        let ns = hl().parse(&words("-e a b"), 80).unwrap_or_default();
        assert!(ns.flag("expand"));
        assert_eq!(ns.list("sources"), ["a", "b"]);
        let ns = hl().parse(&words("-c"), 80).unwrap_or_default();
        assert_eq!(ns.list("sources"), Vec::<String>::new());
        for (args, err) in [
            (
                "-e -c x",
                "argument -c/--count: not allowed with argument -e/--expand",
            ),
            ("-m -i", "argument -i: not allowed with argument -m"),
            ("-L x", "argument -L/--limit: invalid int value: 'x'"),
            ("a -e b", "unrecognized arguments: b"),
        ] {
            assert_eq!(hl_err(args), format!("hl: error: {err}"), "{args}");
        }
        let u = hl().format_usage(80);
        assert_eq!(
            u,
            "usage: hl [-h] [-e] [-d S] [-c] [-L N] [-i | -m] [SOURCES ...]\n"
        );
        let h = hl().format_help(80);
        assert!(h.ends_with("\n\nraw\n  text\n"), "{h}");
        assert!(h.contains("\npositional arguments:\n  SOURCES "), "{h}");
    }

    #[test]
    fn later_cpython_fixes() {
        // an option value `--` is kept
        let ns = hl()
            .parse(&words("--delimiter=-- a"), 80)
            .unwrap_or_default();
        assert_eq!(ns.str("delimiter"), Some("--"));
        let ns = hl().parse(&words("-d -- x a"), 80).unwrap_or_default();
        assert_eq!(ns.str("delimiter"), Some("x"));
        assert_eq!(ns.list("sources"), ["a"]);
        // the separator is dropped from positionals, once
        let ns = hl().parse(&words("-- -- -e"), 80).unwrap_or_default();
        assert_eq!(ns.list("sources"), ["--", "-e"]);
        for (args, err) in [
            ("-ez", "unrecognized arguments: -z"),
            (
                "-e=c",
                "argument -e/--expand: ignored explicit argument 'c'",
            ),
            (
                "-e-c",
                "argument -e/--expand: ignored explicit argument '-c'",
            ),
        ] {
            assert_eq!(hl_err(args), format!("hl: error: {err}"), "{args}");
        }
        let ns = hl().parse(&words("-ed=, a"), 80).unwrap_or_default();
        assert_eq!(ns.str("delimiter"), Some(","));
    }

    #[test]
    fn messages_quote_with_repr() {
        let e = demo().parse(&["drain".to_string(), "--force=\u{a0}".to_string()], 80);
        assert_eq!(
            err_line(e),
            "prog drain: error: argument -f/--force: ignored explicit argument '\\xa0'"
        );
    }
}
