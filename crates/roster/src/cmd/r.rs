//! `roster R`: mirrors `flux R` (flux-core's `src/cmd/flux-R.c`).
//!
//! Subcommands read one or more concatenated R objects on stdin (except
//! `encode` and `parse-config`) and print compact one-line JSON the way
//! jansson's `json_dumps (R, 0)` does.  Error messages are flux's with the
//! `flux-R:` prefix replaced by `roster R:`; every failure exits 1.
use pycompat::getopt::{OptSpec, Outcome, Parsed, Subcommand};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::process::ExitCode;

use hostlist::Hostlist;
use idset::IdSet;
use rset::json::{self, StreamLoader};
use rset::{RError, RerankError, Rset};
use serde_json::{Map, Value};

const PROG: &str = "roster R";

/// A fatal error: message for stderr; exit status 1.
struct Fatal(String);

type Res<T> = Result<T, Fatal>;

/// `log_msg_exit`.
fn die<T>(msg: impl Into<String>) -> Res<T> {
    Err(Fatal(msg.into()))
}

/// An error as `log_msg_exit ("{what}: {e}")`.
fn or_die<T>(r: Result<T, impl std::fmt::Display>, what: &str) -> Res<T> {
    r.map_err(|e| Fatal(format!("{what}: {e}")))
}

/// `log_err_exit`: the message plus `strerror (errno)`.
fn die_errno<T>(msg: impl std::fmt::Display, errno: &str) -> Res<T> {
    Err(Fatal(format!("{msg}: {errno}")))
}

// ---------------------------------------------------------------------------
// Option parsing: flux's liboptparse, through [`pycompat::getopt`].

/// `RSET_DOC`.
pub(crate) const DOC: &str = "Read, generate, and process RFC 20 Resource Set objects.\nOptions:\n";

const ENCODE_OPTS: &[OptSpec] = &[
    OptSpec::new("ranks", 'r', Some("IDSET"), "Generate an R with ranks in IDSET. If not provided then either match the number of nodes given  in --hosts option, or emit a single rank: \"0\""),
    OptSpec::new("cores", 'c', Some("IDS"), "Assign cores with IDS to each rank in R. Default is to assign a single core \"0\" to each rank."),
    OptSpec::new("gpus", 'g', Some("IDS"), "Assign gpu resources with IDS to each rank in R. Default is to assign no gpu resources."),
    OptSpec::new("hosts", 'H', Some("HOSTS"), "Generate R with nodelist set to HOSTS. By default, duplicate the local hostname to match the number of ranks given in --ranks."),
    OptSpec::new("property", 'p', Some("NAME[:RANKS]"), "Assign property NAME to target ranks RANKS. If RANKS is not specified then the property applies to all defined ranks. This option may be specified multiple times for each property"),
    OptSpec::new("local", 'l', None, "Generate child resources from local system"),
    OptSpec::new("xml", 'f', Some(""), "Generate child resources from hwloc XML"),
];

const DECODE_OPTS: &[OptSpec] = &[
    OptSpec::new("short", 's', None, "Print short-form representation of R"),
    OptSpec::new(
        "nodelist",
        'n',
        None,
        "Print nodelist in hostlist form from R, if any",
    ),
    OptSpec::new(
        "ranks",
        'r',
        None,
        "Print ranks in idset form from R, if any",
    ),
    OptSpec::new(
        "count",
        'c',
        Some("TYPE"),
        "Print count of resource TYPE in R (ranks, core, gpu)",
    ),
    OptSpec::new(
        "include",
        'i',
        Some("RANKS"),
        "Include only specified ranks.",
    ),
    OptSpec::new("exclude", 'x', Some("RANKS"), "Exclude specified ranks."),
    OptSpec::new("properties", 'p', Some("LIST"), "Filter on properties"),
];

pub(crate) const SUBS: &[Subcommand] = &[
    Subcommand::new("append", "", "Append multiple R objects on stdin. Emits an error if resource sets are not disjoint.", &[]),
    Subcommand::new("decode", "[OPTIONS]...", "\nReturn the union of all R objects on stdin and print details or summary of the result. By default an RFC 20 JSON object is emitted on stdout, unless one or more options below are used\n\nOptions:\n", DECODE_OPTS),
    Subcommand::new("diff", "", "Return the set difference of multiple R objects on stdin. (i.e. (R1 - R2) - R3 ...)", &[]),
    Subcommand::new("encode", "[OPTIONS]...", "\nEncode RFC 20 R objects for testing.\n\nOptions:\n", ENCODE_OPTS),
    Subcommand::new("intersect", "", "Return the intersection of all R objects on stdin", &[]),
    Subcommand::new("parse-config", "PATH", "Read config from resource.config array", &[]),
    Subcommand::new("remap", "", "Return the union of all R objects on stdin with ranks re-numbered starting from index 0.", &[]),
    Subcommand::new("rerank", "HOSTLIST", "Return the union of all R objects on stdin with ranks re-mapped  based on their index in HOSTLIST.", &[]),
    Subcommand::new("set-property", "PROPERTY:RANKS [PROPERTY:RANKS]...", "Set properties on R object on stdin, emitting the result on stdout", &[]),
    Subcommand::new("verify", "", "Takes 2 R objects on stdin and verifies that the resources in each rank present in R2 has at least resources present for the same rank in R1.", &[]),
];

// ---------------------------------------------------------------------------
// Input

/// `rlist_loadf`: every R object on stdin.
fn load_all(stdin: &[u8]) -> Res<Vec<Rset>> {
    let mut list = Vec::new();
    let mut loader = StreamLoader::new(stdin);
    loop {
        match loader.next_value() {
            Ok(v) => list.push(or_die(Rset::from_json(&v), "Failed to decode R on stdin")?),
            Err(e) => {
                if list.is_empty() {
                    return die(format!("Failed to read an R object: {}", e.text));
                }
                return Ok(list);
            }
        }
    }
}

type Transform = fn(&Rset, &Rset) -> Option<Rset>;

/// `rl_transform`: fold the inputs with `f`, at least `min` of them.
fn transform(cmd: &str, stdin: &[u8], min: usize, f: Transform) -> Res<Rset> {
    let list = load_all(stdin)?;
    if list.len() < min {
        return die(format!("{cmd} requires at least {min} resource sets"));
    }
    let mut it = list.into_iter();
    let Some(mut prev) = it.next() else {
        return die(format!("{cmd} requires at least {min} resource sets"));
    };
    for rl in it {
        match f(&prev, &rl) {
            Some(r) => discard(std::mem::replace(&mut prev, r)),
            None => return die(format!("{cmd} ({}, {}) failed!", prev.dumps(), rl.dumps())),
        }
        discard(rl);
    }
    Ok(prev)
}

fn union_all(stdin: &[u8]) -> Res<Rset> {
    transform("union", stdin, 1, |a, b| a.union(b).ok())
}

fn puts(out: &mut Vec<u8>, rl: Rset) {
    out.extend_from_slice(rl.encode().as_bytes());
    out.push(b'\n');
    discard(rl);
}

/// Skip tearing down a large set: the process is about to exit, and
/// freeing every node would cost more than the work itself.
fn discard<T>(v: T) {
    std::mem::forget(v);
}

// ---------------------------------------------------------------------------
// Subcommands

use topo::local_hostname;

fn ranks_string(rl: &Rset) -> String {
    rl.ranks().encode()
}

/// `set_one_property`: `NAME[:RANKS]` into the properties object.
fn set_one_property(o: &mut Map<String, Value>, allranks: &str, s: &str) {
    let (name, ranks) = match s.split_once(':') {
        Some((n, r)) => (n, r),
        None => (s, allranks),
    };
    o.insert(name.to_string(), Value::String(ranks.to_string()));
}

fn assign_props(rl: &mut Rset, specs: &[&str]) -> Res<()> {
    let allranks = ranks_string(rl);
    let mut o = Map::new();
    for s in specs {
        set_one_property(&mut o, &allranks, s);
    }
    or_die(
        rl.assign_properties(&Value::Object(o)),
        "failed to assign properties",
    )
}

fn cmd_encode(p: &Parsed, out: &mut Vec<u8>) -> Res<()> {
    let gpus = p.get("gpus").unwrap_or("");
    let mut cores = p.get("cores").unwrap_or("");
    let topo_src = p.has("local") || p.has("xml");
    if gpus.is_empty() && cores.is_empty() {
        cores = "0";
    } else if topo_src {
        return die("do not specify --cores or --gpus with --local or --xml");
    }
    // get_ranks_and_hostlist
    let hostlist_from_option = |expected: usize| -> Res<Vec<String>> {
        match p.get("hosts") {
            None => {
                let h = local_hostname();
                Ok(vec![h; expected])
            }
            Some(s) => {
                let Ok(hl) = Hostlist::decode(s) else {
                    return die(format!("invalid hostlist '{s}'"));
                };
                if expected != 0 && hl.len() != expected {
                    return die(format!(
                        "hostname count in '{s}' does not match nranks ({})",
                        expected as i32
                    ));
                }
                Ok(hl.iter().collect())
            }
        }
    };
    let (ranks, hosts): (IdSet, Vec<String>) = if !p.has("ranks") {
        let hosts = if p.has("hosts") {
            hostlist_from_option(0)?
        } else {
            hostlist_from_option(1)?
        };
        let n = hosts.len() as u32;
        let ranks = if n == 0 {
            IdSet::new()
        } else {
            IdSet::from_range(0, n - 1)
        };
        (ranks, hosts)
    } else {
        let s = p.get("ranks").unwrap_or("");
        let Ok(ranks) = IdSet::parse(s) else {
            return die(format!("Failed to decode ranks='{s}' as idset"));
        };
        if ranks.len() > rset::MAX_NODES as u64 {
            return die(RError::TooManyNodes.to_string());
        }
        let hosts = hostlist_from_option(ranks.len() as usize)?;
        (ranks, hosts)
    };
    // get_xml
    let topo = if let Some(path) = p.get("xml") {
        let text = if path == "-" {
            let mut s = String::new();
            if let Err(e) = std::io::stdin().read_to_string(&mut s) {
                return die_errno(path, &errno_text(&e));
            }
            s
        } else {
            match std::fs::read_to_string(path) {
                Ok(s) => s,
                Err(e) => return die_errno(path, &errno_text(&e)),
            }
        };
        Some(or_die(topo::from_hwloc_xml(&text), "rlist_from_hwloc")?)
    } else if p.has("local") {
        let what = "failed to gather local topology XML";
        Some(or_die(topo::discover_local(), what)?)
    } else {
        None
    };
    let mut rl = Rset::new();
    for (rank, host) in ranks.iter().zip(hosts.iter()) {
        if let Some(t) = &topo {
            if rl.append_node(Some(host), rank, &t.cores, &t.gpus).is_err() {
                return die_errno("rlist_append", "Success");
            }
        } else if rl.append_rank_cores(Some(host), rank, cores).is_err() {
            return die_errno(format!("rlist_append rank={rank}"), "Invalid argument");
        }
        if !gpus.is_empty() {
            // flux ignores failures here.
            let _ = rl.rank_add_child(rank, "gpu", gpus);
        }
    }
    let props = p.all("property");
    if !props.is_empty() {
        assign_props(&mut rl, &props)?;
    }
    puts(out, rl);
    Ok(())
}

fn errno_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

fn cmd_append(stdin: &[u8], out: &mut Vec<u8>) -> Res<()> {
    let list = load_all(stdin)?;
    let mut result = Rset::new();
    for mut rl in list {
        let x = result.intersect_probe(&mut rl);
        if x.nnodes() > 0 {
            return die(format!(
                "R objects '{}' and '{}' overlap",
                result.dumps(),
                rl.dumps()
            ));
        }
        if let Err(e) = result.append(&rl) {
            let errno = match e {
                RError::Overlap { .. } => "File exists",
                RError::TooManyNodes => "Cannot allocate memory",
                _ => "Success",
            };
            return die_errno("rlist_append", errno);
        }
        discard(rl);
        discard(x);
    }
    puts(out, result);
    Ok(())
}

fn cmd_decode(p: &Parsed, stdin: &[u8], out: &mut Vec<u8>) -> Res<()> {
    let mut rl = union_all(stdin)?;
    if let Some(arg) = p.get("properties") {
        let props: Vec<Value> = arg
            .split(',')
            .filter(|t| !t.is_empty())
            .map(|t| Value::String(t.to_string()))
            .collect();
        let mut c = Map::new();
        c.insert("properties".into(), Value::Array(props));
        match rl.copy_constraint(&Value::Object(c)) {
            Ok(r) => discard(std::mem::replace(&mut rl, r)),
            Err(e) => {
                return die_errno(
                    format!("Invalid property constraint: {e}"),
                    "Invalid argument",
                )
            }
        }
    }
    if let Some(arg) = p.get("include") {
        let Ok(ranks) = IdSet::parse(arg) else {
            return die_errno(format!("Invalid ranks option: '{arg}'"), "Invalid argument");
        };
        let r = rl.copy_ranks(&ranks);
        discard(std::mem::replace(&mut rl, r));
    }
    if let Some(arg) = p.get("exclude") {
        let Ok(ranks) = IdSet::parse(arg) else {
            return die_errno(
                format!("Invalid idset in --exclude option: {arg}"),
                "Invalid argument",
            );
        };
        rl.remove_ranks(&ranks);
    }
    let mut lines = 0;
    if p.has("short") {
        out.extend_from_slice(rl.dumps().as_bytes());
        out.push(b'\n');
        lines += 1;
    }
    if p.has("nodelist") {
        let Some(hl) = rl.nodelist() else {
            return die_errno("rlist_nodelist", "Success");
        };
        out.extend_from_slice(hl.encode().as_bytes());
        out.push(b'\n');
        lines += 1;
    }
    if p.has("ranks") {
        out.extend_from_slice(rl.ranks().encode().as_bytes());
        out.push(b'\n');
        lines += 1;
    }
    if let Some(ty) = p.get("count") {
        let count: i64 = match ty {
            "node" => rl.nnodes() as i64,
            "core" => rl.core_avail(),
            other => rl.count(other) as i64,
        };
        // printf ("%d") of a C int.
        out.extend_from_slice(format!("{}\n", count as i32).as_bytes());
        lines += 1;
    }
    if lines == 0 {
        puts(out, rl);
    } else {
        discard(rl);
    }
    Ok(())
}

fn cmd_verify(stdin: &[u8], err: &mut Vec<u8>) -> Res<ExitCode> {
    let list = load_all(stdin)?;
    if list.len() != 2 {
        return die("verify requires exactly 2 R objects on stdin");
    }
    let v = rset::verify(&list[0], &list[1], None);
    if v.rc != 0 {
        err.extend_from_slice(format!("{PROG}: {}\n", v.message).as_bytes());
    }
    Ok(if v.rc < 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn cmd_rerank(args: &[String], stdin: &[u8], out: &mut Vec<u8>) -> Res<()> {
    let mut rl = union_all(stdin)?;
    if args.len() != 1 {
        return die_errno("Must provide a hostlist for re-ranking", "Success");
    }
    if let Err(e) = rl.rerank(&args[0]) {
        return match e {
            RerankError::NotFound(_) => die("failed to find one or more provided hosts in R"),
            RerankError::TooMany { nodes, .. } => {
                die(format!("Too many hosts specified (expected {nodes})"))
            }
            RerankError::TooFew { nodes, .. } => {
                die(format!("Too few hosts specified (expected {nodes})"))
            }
            RerankError::Hostlist(_) => die_errno("rlist_rerank", "Invalid argument"),
            RerankError::NoHostnames => die_errno("rlist_rerank", "Success"),
        };
    }
    puts(out, rl);
    Ok(())
}

fn cmd_set_property(args: &[String], stdin: &[u8], out: &mut Vec<u8>) -> Res<()> {
    let mut rl = union_all(stdin)?;
    let specs: Vec<&str> = args.iter().map(String::as_str).collect();
    assign_props(&mut rl, &specs)?;
    puts(out, rl);
    Ok(())
}

fn load_json_file(path: &str) -> Result<Value, (String, i32)> {
    let bytes = std::fs::read(path)
        .map_err(|e| (format!("unable to open {path}: {}", errno_text(&e)), -1))?;
    json::loads(&bytes).map_err(|e| (e.text, e.line))
}

fn cmd_parse_config(args: &[String], out: &mut Vec<u8>) -> Res<()> {
    let Some(path) = args.first() else {
        return die("flux_conf_parse: Invalid argument");
    };
    let conf = config::flux_conf::parse_path(std::path::Path::new(path));
    let conf = or_die(conf, "flux_conf_parse")?;
    // flux_conf_unpack (conf, "{s:{s?o s?s s?s}}", "resource", "config",
    // "path", "scheduling")
    let Some(resource) = conf.get("resource") else {
        return die("Config file error: Object item not found: resource");
    };
    let Value::Object(res) = resource else {
        return die(format!(
            "Config file error: Expected object, got {}",
            json::type_name(resource)
        ));
    };
    let config = res.get("config");
    let string_key = |k: &str| -> Res<Option<&str>> {
        match res.get(k) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => die(format!(
                "Config file error: Expected string, got {}",
                json::type_name(other)
            )),
        }
    };
    let rpath = string_key("path")?;
    let sched = string_key("scheduling")?;
    let mut rl = match config {
        Some(o) => or_die(Rset::from_config(o), "Config file error")?,
        None => {
            let Some(rpath) = rpath else {
                return die("Config file error: resource.config or resource.path must be defined");
            };
            let parsed = load_json_file(rpath)
                .and_then(|v| Rset::from_json(&v).map_err(|e| (e.to_string(), e.line())));
            match parsed {
                Ok(r) => r,
                Err((text, -1)) => return die(format!("{rpath}: {text}")),
                Err((text, line)) => return die(format!("{rpath}: {text} on line {line}")),
            }
        }
    };
    if let Some(s) = sched {
        match load_json_file(s) {
            Ok(v) => rl.set_scheduling(Some(v)),
            Err((text, -1)) => return die(format!("resource.scheduling: {s}: {text}")),
            Err((text, line)) => {
                return die(format!("resource.scheduling: {s}: {text} on line {line}"))
            }
        }
    }
    puts(out, rl);
    Ok(())
}

fn read_stdin() -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = std::io::stdin().lock().read_to_end(&mut buf);
    buf
}

fn run(sub: &Subcommand, p: &Parsed, out: &mut Vec<u8>, err: &mut Vec<u8>) -> Res<ExitCode> {
    match sub.name {
        "encode" => cmd_encode(p, out)?,
        "append" => cmd_append(&read_stdin(), out)?,
        "diff" => {
            let r = transform("diff", &read_stdin(), 2, |a, b| a.diff(b).ok())?;
            puts(out, r);
        }
        "intersect" => {
            let r = transform("intersect", &read_stdin(), 2, |a, b| Some(a.intersect(b)))?;
            puts(out, r);
        }
        "remap" => {
            let mut r = union_all(&read_stdin())?;
            r.remap();
            puts(out, r);
        }
        "rerank" => cmd_rerank(&p.args, &read_stdin(), out)?,
        "decode" => cmd_decode(p, &read_stdin(), out)?,
        "verify" => return cmd_verify(&read_stdin(), err),
        "set-property" => cmd_set_property(&p.args, &read_stdin(), out)?,
        "parse-config" => cmd_parse_config(&p.args, out)?,
        _ => return die("unknown subcommand"),
    }
    Ok(ExitCode::SUCCESS)
}

pub fn main(args: Vec<OsString>) -> ExitCode {
    let args: Vec<String> = args
        .into_iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let stderr = |s: &str| {
        let mut e = std::io::stderr().lock();
        let _ = e.write_all(s.as_bytes());
        let _ = e.flush();
    };
    let Some(subname) = args.get(1) else {
        stderr(&pycompat::getopt::usage(PROG, DOC, SUBS));
        return ExitCode::from(1);
    };
    if subname == "-h" || subname == "--help" {
        print!("{}", pycompat::getopt::usage(PROG, DOC, SUBS));
        return ExitCode::SUCCESS;
    }
    let Some(sub) = SUBS.iter().find(|s| s.name == subname) else {
        if subname.starts_with('-') {
            stderr(&format!("{PROG}: unrecognized option '{subname}'\n"));
        }
        stderr(&pycompat::getopt::usage(PROG, DOC, SUBS));
        return ExitCode::from(1);
    };
    let parsed = match sub.parse(PROG, &args[2..]) {
        Outcome::Ok(p) => p,
        Outcome::Help => {
            print!("{}", sub.usage(PROG));
            return ExitCode::SUCCESS;
        }
        Outcome::Error(msg) => {
            stderr(&format!("{msg}\n{}", sub.usage(PROG)));
            return ExitCode::from(1);
        }
    };
    let mut out = Vec::new();
    let mut err = Vec::new();
    let result = run(sub, &parsed, &mut out, &mut err);
    {
        let mut so = std::io::stdout().lock();
        let _ = so.write_all(&out);
        let _ = so.flush();
    }
    if !err.is_empty() {
        stderr(&String::from_utf8_lossy(&err));
    }
    match result {
        Ok(code) => code,
        Err(Fatal(msg)) => {
            stderr(&format!("{PROG}: {msg}\n"));
            ExitCode::from(1)
        }
    }
}
