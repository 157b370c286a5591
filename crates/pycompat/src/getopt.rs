//! flux's liboptparse as flux-core's C commands with sub-commands use it
//! (`flux R`): option parsing with GNU `getopt_long` semantics
//! (permutation, bundled short options, `--name=value`, unique prefixes of
//! long options, `--`), glibc's error texts, and the usage text
//! (`Usage: PROG SUB USAGE`, the sub-command's doc, then options sorted by
//! name with their help wrapped at column 25 of an 80-column line).
//!
//! Help text is wrapped greedily at word boundaries, never inside a word
//! ([`crate::textwrap::wrap_with`] without hyphen breaks).

use crate::textwrap::wrap_with;

/// One `struct optparse_option`.
#[derive(Debug, Clone, Copy)]
pub struct OptSpec {
    /// The long name (`--name`).
    pub name: &'static str,
    /// The short key (`-k`).
    pub key: char,
    /// `Some` when the option takes an argument; the text after `=` in
    /// the usage (empty: none shown).
    pub arginfo: Option<&'static str>,
    /// The help text.
    pub usage: &'static str,
}

impl OptSpec {
    /// An option: long name, short key, argument info, help text.
    pub const fn new(
        name: &'static str,
        key: char,
        arginfo: Option<&'static str>,
        usage: &'static str,
    ) -> OptSpec {
        OptSpec {
            name,
            key,
            arginfo,
            usage,
        }
    }
}

/// One `struct optparse_subcommand`.
#[derive(Debug, Clone, Copy)]
pub struct Subcommand {
    /// The sub-command word.
    pub name: &'static str,
    /// What follows it in the usage line.
    pub usage: &'static str,
    /// The doc printed under the usage line.
    pub doc: &'static str,
    /// Its options (`-h, --help` is implied).
    pub opts: &'static [OptSpec],
}

impl Subcommand {
    /// A sub-command: word, usage, doc, options.
    pub const fn new(
        name: &'static str,
        usage: &'static str,
        doc: &'static str,
        opts: &'static [OptSpec],
    ) -> Subcommand {
        Subcommand {
            name,
            usage,
            doc,
            opts,
        }
    }
}

/// Parsed options: (option name, value) in command-line order, and the
/// positional arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// The options given, in order.
    pub opts: Vec<(&'static str, Option<String>)>,
    /// The positional arguments.
    pub args: Vec<String>,
}

impl Parsed {
    /// `optparse_hasopt`.
    pub fn has(&self, name: &str) -> bool {
        self.opts.iter().any(|(n, _)| *n == name)
    }

    /// The last value given for `name` (`optparse_getopt`).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.opts
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .and_then(|(_, v)| v.as_deref())
    }

    /// Every value given for `name`, in order (`optparse_getopt_next`).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.opts
            .iter()
            .filter(|(n, _)| *n == name)
            .filter_map(|(_, v)| v.as_deref())
            .collect()
    }
}

/// How parsing ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The options and arguments.
    Ok(Parsed),
    /// `-h` / `--help`: print the sub-command's usage, exit 0.
    Help,
    /// A getopt error (the message, without the usage that follows it).
    Error(String),
}

/// The top-level usage: one line per sub-command, the program's doc, and
/// `-h, --help`.
pub fn usage(prog: &str, doc: &str, subs: &[Subcommand]) -> String {
    let mut s = String::new();
    for (i, sub) in subs.iter().enumerate() {
        let lead = if i == 0 { "Usage" } else { "or" };
        s.push_str(&format!("{lead:>5}: {prog} {} {}\n", sub.name, sub.usage));
    }
    s.push_str(doc);
    s.push_str("  -h, --help               Display this message.\n");
    s
}

impl Subcommand {
    /// The sub-command's usage text (`optparse_print_usage`).
    pub fn usage(&self, prog: &str) -> String {
        let mut s = format!("Usage: {prog} {} {}\n", self.name, self.usage);
        s.push_str(self.doc);
        if !self.doc.ends_with('\n') {
            s.push('\n');
        }
        let width = 25;
        let mut opts: Vec<(String, &str)> = vec![("-h, --help".into(), "Display this message.")];
        for o in self.opts {
            let arg = match o.arginfo {
                Some(a) if !a.is_empty() => format!("={a}"),
                _ => String::new(),
            };
            opts.push((format!("-{}, --{}{arg}", o.key, o.name), o.usage));
        }
        opts.sort_by_key(|a| a.0.to_lowercase());
        for (info, usage) in opts {
            let info = format!("  {info}");
            let mut lines = wrap_with(usage, 80 - width, false).into_iter();
            let first = lines.next().unwrap_or_default();
            if info.len() < width {
                s.push_str(&format!("{info:<width$}{first}\n"));
            } else {
                s.push_str(&format!("{info}\n{:width$}{first}\n", ""));
            }
            for l in lines {
                s.push_str(&format!("{:width$}{l}\n", ""));
            }
        }
        s
    }

    /// Parse the words after the sub-command (`optparse_parse_args`).
    pub fn parse(&self, prog: &str, argv: &[String]) -> Outcome {
        let prog = format!("{prog} {}", self.name);
        let mut opts = Vec::new();
        let mut args = Vec::new();
        let mut i = 0;
        while let Some(a) = argv.get(i) {
            i += 1;
            if a == "--" {
                args.extend(argv.get(i..).unwrap_or(&[]).iter().cloned());
                break;
            }
            if let Some(long) = a.strip_prefix("--") {
                let (name, inline) = match long.split_once('=') {
                    Some((n, v)) => (n, Some(v.to_string())),
                    None => (long, None),
                };
                let spec = if name == "help" {
                    return Outcome::Help;
                } else if let Some(s) = self.opts.iter().find(|o| o.name == name) {
                    s
                } else {
                    let cands: Vec<&'static OptSpec> = self
                        .opts
                        .iter()
                        .filter(|o| o.name.starts_with(name))
                        .collect();
                    let help = !name.is_empty() && "help".starts_with(name);
                    match (cands.as_slice(), help) {
                        ([], true) => return Outcome::Help,
                        ([only], false) => *only,
                        ([], false) => {
                            return Outcome::Error(format!(
                                "{prog}: unrecognized option '--{name}'"
                            ))
                        }
                        _ => {
                            return Outcome::Error(format!(
                                "{prog}: option '--{name}' is ambiguous"
                            ))
                        }
                    }
                };
                if spec.arginfo.is_some() {
                    let v = match inline {
                        Some(v) => v,
                        None => match argv.get(i) {
                            Some(v) => {
                                i += 1;
                                v.clone()
                            }
                            None => {
                                return Outcome::Error(format!(
                                    "{prog}: option '--{}' requires an argument",
                                    spec.name
                                ))
                            }
                        },
                    };
                    opts.push((spec.name, Some(v)));
                } else {
                    if inline.is_some() {
                        return Outcome::Error(format!(
                            "{prog}: option '--{}' doesn't allow an argument",
                            spec.name
                        ));
                    }
                    opts.push((spec.name, None));
                }
                continue;
            }
            if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
                let chars: Vec<char> = cluster.chars().collect();
                let mut j = 0;
                while let Some(&c) = chars.get(j) {
                    j += 1;
                    if c == 'h' {
                        return Outcome::Help;
                    }
                    let Some(spec) = self.opts.iter().find(|o| o.key == c) else {
                        return Outcome::Error(format!("{prog}: invalid option -- '{c}'"));
                    };
                    if spec.arginfo.is_some() {
                        let rest: String = chars.get(j..).unwrap_or(&[]).iter().collect();
                        let v = if !rest.is_empty() {
                            rest
                        } else {
                            match argv.get(i) {
                                Some(v) => {
                                    i += 1;
                                    v.clone()
                                }
                                None => {
                                    return Outcome::Error(format!(
                                        "{prog}: option requires an argument -- '{c}'"
                                    ))
                                }
                            }
                        };
                        opts.push((spec.name, Some(v)));
                        break;
                    }
                    opts.push((spec.name, None));
                }
                continue;
            }
            args.push(a.clone());
        }
        Outcome::Ok(Parsed { opts, args })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTS: &[OptSpec] = &[
        OptSpec::new(
            "count",
            'c',
            Some("TYPE"),
            "Print count of resource TYPE in R (ranks, core, gpu)",
        ),
        OptSpec::new("short", 's', None, "Print short-form representation of R"),
        OptSpec::new("shape", 'S', None, "x"),
    ];
    const SUB: Subcommand = Subcommand::new("decode", "[OPTIONS]...", "Doc.", OPTS);

    fn parse(words: &[&str]) -> Outcome {
        let w: Vec<String> = words.iter().map(|s| s.to_string()).collect();
        SUB.parse("p", &w)
    }

    #[test]
    fn gnu_semantics() {
        let Outcome::Ok(p) = parse(&["a", "-sc", "core", "--cou=gpu", "b", "--", "-s"]) else {
            panic!("parse failed");
        };
        assert_eq!(p.args, ["a", "b", "-s"]);
        assert_eq!(p.get("count"), Some("gpu"));
        assert_eq!(p.all("count"), ["core", "gpu"]);
        assert!(p.has("short"));
        assert_eq!(parse(&["--he"]), Outcome::Help);
        for (word, err) in [
            ("-z", "invalid option -- 'z'"),
            ("--sh", "option '--sh' is ambiguous"),
            ("--short=1", "option '--short' doesn't allow an argument"),
            ("-c", "option requires an argument -- 'c'"),
        ] {
            assert_eq!(parse(&[word]), Outcome::Error(format!("p decode: {err}")));
        }
    }

    #[test]
    fn usage_sorted_and_wrapped() {
        assert_eq!(
            SUB.usage("p"),
            "Usage: p decode [OPTIONS]...\nDoc.\n\
             \x20 -c, --count=TYPE       Print count of resource TYPE in R (ranks, core, gpu)\n\
             \x20 -h, --help             Display this message.\n\
             \x20 -S, --shape            x\n\
             \x20 -s, --short            Print short-form representation of R\n"
        );
        assert_eq!(
            usage("p", "D\n", &[SUB]),
            "Usage: p decode [OPTIONS]...\nD\n  -h, --help               Display this message.\n"
        );
    }
}
