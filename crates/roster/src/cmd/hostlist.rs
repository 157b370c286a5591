//! `roster hostlist`: mirrors `flux hostlist` (flux-core `src/cmd/flux-hostlist.py`,
//! `doc/man1/flux-hostlist.rst`, `t/t2814-hostlist-cmd.t`).
//!
//! The behaviour reproduces the Python command and the parts of flux's
//! Python bindings it relies on, observable quirks included:
//!
//! * options are parsed by [`pycompat::argparse`] (abbreviated long options,
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
use pycompat::argparse::{Arg, Namespace, Parser, Stop};
use pycompat::{float_repr, repr_str};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

/// The program name in usage texts: what a user types.
const PROG: &str = "roster hostlist";
/// The prefix of diagnostics (`flux-hostlist: ERROR: ...` in flux).
const LOG_PREFIX: &str = "roster-hostlist";

// ------------------------------------------------------------------ command line

/// flux-hostlist.py's `ArgumentParser`, through [`pycompat::argparse`].
pub(crate) fn parser() -> Parser {
    Parser::new(PROG)
        .arg(Arg::flag(
            "expand",
            &["-e", "--expand"],
            "Expand hostlist using defined output delimiter",
        ))
        .arg(
            Arg::opt(
                "delimiter",
                &["-d", "--delimiter"],
                "Set output delimiter for expanded hostlist (default=' ')",
            )
            .metavar("S"),
        )
        .arg(Arg::flag(
            "count",
            &["-c", "--count"],
            "Print the total number of hosts",
        ))
        .arg(
            Arg::opt(
                "nth",
                &["-n", "--nth"],
                "Output hosts at indices in idset IDS (-IDS to index from end)",
            )
            .metavar("[-]IDS"),
        )
        .arg(
            Arg::opt(
                "find",
                &["-F", "--find"],
                "Output indices of HOSTS in target in hostlist. Fails if any host is not found.",
            )
            .metavar("HOSTS"),
        )
        .arg(
            Arg::opt(
                "limit",
                &["-L", "--limit"],
                "Output at most N hosts (-N for the last N hosts)",
            )
            .metavar("N")
            .typed("int", |w| py_int(w).is_some()),
        )
        .arg(Arg::flag("sort", &["-S", "--sort"], "Return sorted result"))
        .arg(
            Arg::opt(
                "exclude",
                &["-x", "--exclude"],
                "Exclude all occurrences of HOSTS or indices from final result",
            )
            .metavar("IDS|HOSTS")
            .typed("Hostlist", |w| Hostlist::decode(w).is_ok()),
        )
        .arg(Arg::flag(
            "union",
            &["-u", "--union", "--unique"],
            "Return only unique hosts in the final hostlist. Without other options, \
             this is the same as the union of all hostlist args (default mode is append).",
        ))
        .arg(Arg::flag(
            "intersect",
            &["-i", "--intersect"],
            "Return the intersection of all hostlists",
        ))
        .arg(Arg::flag(
            "minus",
            &["-m", "--minus"],
            "Subtract all hostlist args from first argument",
        ))
        .arg(Arg::flag(
            "xor",
            &["-X", "--xor"],
            "Return the symmetric difference of all hostlists",
        ))
        .arg(Arg::flag(
            "fallback",
            &["-f", "--fallback"],
            "Fallback to treating jobids that are not found as hostnames (for hostnames \
             that are also valid jobids e.g. f1, fuzz100, etc)",
        ))
        .arg(Arg::flag(
            "local",
            &["-l", "--local"],
            "Set the default source to 'local' instead of 'stdin'",
        ))
        .arg(Arg::flag(
            "quiet",
            &["-q", "--quiet"],
            "No output. Exit with nonzero exit status if hostlist is empty",
        ))
        .arg(Arg::pos_any("sources", "(optional) One or more hostlist sources").metavar("SOURCES"))
        .exclusive(&["expand", "count"])
        .exclusive(&["intersect", "minus", "xor"])
        .epilog(EPILOG)
}

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

impl Args {
    fn from_namespace(ns: &Namespace) -> Args {
        Args {
            expand: ns.flag("expand"),
            delimiter: ns.str("delimiter").map(String::from),
            count: ns.flag("count"),
            nth: ns.str("nth").map(String::from),
            find: ns.str("find").map(String::from),
            limit: ns.str("limit").and_then(py_int),
            sort: ns.flag("sort"),
            exclude: ns.str("exclude").and_then(|x| Hostlist::decode(x).ok()),
            union: ns.flag("union"),
            intersect: ns.flag("intersect"),
            minus: ns.flag("minus"),
            xor: ns.flag("xor"),
            fallback: ns.flag("fallback"),
            local: ns.flag("local"),
            quiet: ns.flag("quiet"),
            sources: ns.list("sources").to_vec(),
        }
    }
}

/// Parse the command line: the options, or what to print and how to exit.
fn parse_args(words: &[String], columns: usize) -> Result<Args, Stop> {
    parser()
        .parse(words, columns)
        .map(|ns| Args::from_namespace(&ns))
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
    let mut result = select(hl1, hl2, true)?;
    result.uniq();
    Ok(result)
}

/// flux-hostlist.py `difference()` (`inside` false), or the hosts of `hl1`
/// that `hl2` holds (`inside` true), in `hl1`'s order.
fn select(hl1: &Hostlist, hl2: &Hostlist, inside: bool) -> PyResult<Hostlist> {
    let mut result = Hostlist::new();
    let hl2 = hl2.finder();
    for host in py_hosts(hl1)? {
        if py_contains(&hl2, &host)? == inside {
            py_append_str(&mut result, &host)?;
        }
    }
    Ok(result)
}

/// flux-hostlist.py `xor()`.
fn xor(hl1: &Hostlist, hl2: &Hostlist) -> PyResult<Hostlist> {
    let mut result = select(hl1, hl2, false)?;
    result.append(&select(hl2, hl1, false)?);
    result.uniq();
    Ok(result)
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
            .map_err(|_| format!("could not convert string to float: {}", repr_str(&v)))?,
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
                    float_repr(timeout)
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
                // Hostlist(keep): a host that does not decode again (`n1]`)
                // is a ValueError, which flux-hostlist catches and then
                // passes the list along unaltered.
                let mut nl = Hostlist::new();
                if keep.iter().all(|h| py_append_str(&mut nl, h).is_ok()) {
                    hl = nl;
                }
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
    let (words, columns) = super::words_and_columns(&args);
    let parsed = match parse_args(&words, columns) {
        Ok(a) => a,
        Err(Stop::Help(text)) => {
            print!("{text}");
            return ExitCode::SUCCESS;
        }
        Err(Stop::Error(text)) => {
            eprint!("{text}");
            return ExitCode::from(2);
        }
    };
    match run(&parsed) {
        Ok((out, code)) => {
            let mut stdout = std::io::stdout().lock();
            // (a closed pipe ends the process by SIGPIPE, see main.rs)
            if let Err(e) = stdout
                .write_all(out.as_bytes())
                .and_then(|()| stdout.flush())
            {
                let e = e.to_string();
                let e = e.split(" (os error").next().unwrap_or(&e);
                eprintln!("{LOG_PREFIX}: ERROR: {e}");
                return ExitCode::from(1);
            }
            ExitCode::from(code)
        }
        Err(msg) => {
            eprintln!("{LOG_PREFIX}: ERROR: {msg}");
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: &[&str]) -> Result<Args, String> {
        let w: Vec<String> = v.iter().map(|s| s.to_string()).collect();
        parse_args(&w, 80).map_err(|e| match e {
            Stop::Help(_) => "HELP".to_string(),
            Stop::Error(t) => t
                .lines()
                .last()
                .and_then(|l| l.split_once(": error: "))
                .map_or_else(|| t.clone(), |(_, m)| m.to_string()),
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
        let cases: &[(&[&str], &str)] = &[
            (
                &["-e", "-c", "x"],
                "argument -c/--count: not allowed with argument -e/--expand",
            ),
            (
                &["-i", "-X", "x"],
                "argument -X/--xor: not allowed with argument -i/--intersect",
            ),
            (
                &["--u", "x"],
                "ambiguous option: --u could match --union, --unique",
            ),
            (
                &["--ex", "x"],
                "ambiguous option: --ex could match --expand, --exclude",
            ),
            (
                &["-L", "x", "y"],
                "argument -L/--limit: invalid int value: 'x'",
            ),
            (
                &["-x", "foo[", "y"],
                "argument -x/--exclude: invalid Hostlist value: 'foo['",
            ),
            (&["a", "-e", "b"], "unrecognized arguments: b"),
            (&["-z", "a"], "unrecognized arguments: -z"),
            // argparse 3.13+: an unknown letter in a cluster is left over
            (&["-qz"], "unrecognized arguments: -z"),
            (
                &["-q=z"],
                "argument -q/--quiet: ignored explicit argument 'z'",
            ),
            (
                &["--expand=1"],
                "argument -e/--expand: ignored explicit argument '1'",
            ),
            (&["a", "-h"], "HELP"),
            (&["-n"], "argument -n/--nth: expected one argument"),
        ];
        for &(args, want) in cases {
            assert_eq!(parse(args).err().as_deref(), Some(want), "{args:?}");
        }
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
        let u = parser().format_usage(80);
        assert!(u.starts_with("usage: roster hostlist [-h] [-e] [-d S] [-c] [-n [-]IDS]"));
        assert!(u.lines().all(|l| l.len() <= 78), "{u}");
        assert!(u.contains("[-i | -m | -X]"));
        assert!(u.trim_end().ends_with("[SOURCES ...]"));
        assert!(parser().format_help(80).contains("SOURCES may include:"));
    }
}
