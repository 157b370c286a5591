//! The command engine of `roster graph`: one [`Session`] holds the graph,
//! the jobs matched so far and the match timings; [`Session::run_line`]
//! runs one command line.
//!
//! Text output follows resource-query: a match prints the allocated R on
//! one line (as `json_dumps (R, 0)`; with its `scheduling` JGF for
//! `--format rv1`, or only the JGF for `--format jgf`), then an `INFO:`
//! banner; failures print `ERROR: ...` on stderr.  With `--json` each
//! command prints exactly one JSON object on one line (errors too, as
//! `{"command": ..., "error": ...}`), so replies pair with commands.
//!
//! Job ids count from 1 and are consumed by every `match allocate*`
//! attempt that gets as far as matching (found or not), as resource-query
//! does; `satisfiability` and failed commands consume none.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::time::Instant;

use clap::ValueEnum;
use model::hwloc::HwlocOptions;
use model::jgf::JgfStyle;
use model::matcher::Request;
use model::{Graph, ModelError, Pred, State};
use rset::Rset;
use serde_json::{json, Map, Value};

use super::LoadFormat;

/// How graph-valued results (match, find, copy) are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// RFC 20 R without `scheduling` (Fluxion's default match format).
    #[value(name = "rv1_nosched", alias = "R")]
    Rv1Nosched,
    /// RFC 20 R with the JGF of the resources in `scheduling`.
    #[value(name = "rv1")]
    Rv1,
    /// The JGF alone, in Fluxion's compact form.
    #[value(name = "jgf")]
    Jgf,
}

/// What running a line did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// The command was reported as failed.
    Failed,
    /// `quit`: stop reading commands.
    Quit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum JobState {
    Allocated,
    Reserved,
    Canceled,
}

impl JobState {
    fn as_str(self) -> &'static str {
        match self {
            JobState::Allocated => "ALLOCATED",
            JobState::Reserved => "RESERVED",
            JobState::Canceled => "CANCELED",
        }
    }
}

#[derive(Debug, Clone)]
struct JobRec {
    state: JobState,
    at: i64,
    jobspec: String,
    overhead: f64,
}

/// Command table: (name, abbreviation, arguments, description).  The RFC 4
/// method each command reaches is named in its description.
const COMMANDS: &[(&str, &str, &str, &str)] = &[
    (
        "match",
        "m",
        "allocate|allocate_with_satisfiability|satisfiability JOBSPEC",
        "Match: match a jobspec (YAML or JSON file) and allocate it now, or test whether it could ever be satisfied",
    ),
    (
        "free",
        "c",
        "JOBID | PATH JOBID [N]",
        "Free(S, [N]): free a job everywhere; or its records at and below PATH; or shrink its record on PATH by N units (alias: cancel)",
    ),
    (
        "allocate",
        "a",
        "PATH N JOBID",
        "Allocate(N, S): allocate N units of PATH to JOBID now; grows the job's allocation there if it has one",
    ),
    (
        "reserve",
        "rv",
        "PATH N JOBID START END",
        "reserve N units of PATH for JOBID during [START, END) (same accounting in time as allocations)",
    ),
    (
        "promote",
        "pr",
        "JOBID",
        "turn a reservation into an allocation (its window is kept)",
    ),
    (
        "find",
        "f",
        "EXPR",
        "Find: resources matching EXPR (e.g. status=down, property=ssd, type=node and sched-now=allocated) with their children and ancestors",
    ),
    (
        "aggregate",
        "ag",
        "[PATH]",
        "Aggregate: available units by type at and below PATH (default: the root)",
    ),
    (
        "copy",
        "cp",
        "[PATH]",
        "Copy: the available resources at and below PATH (sizes = available units)",
    ),
    (
        "duplicate",
        "dup",
        "",
        "Duplicate: the whole hierarchy unchanged, with its allocation data (full JGF)",
    ),
    ("size", "sz", "PATH", "Size: units in the pool"),
    (
        "allocated",
        "al",
        "PATH",
        "Allocated: units of the pool allocated to jobs now",
    ),
    (
        "available",
        "av",
        "PATH",
        "Available: units of the pool available now (0 when it or an ancestor is out of service, staged or full)",
    ),
    (
        "pool",
        "po",
        "PATH",
        "every RFC 4 datum of a pool: type, uuid, names, id, properties, tags, size, unit, state, uri, parent, children, exclusive, staged, allocations, reservations, shared",
    ),
    ("info", "i", "JOBID", "state of a job"),
    ("list", "l", "", "every job matched or allocated so far"),
    ("stat", "s", "", "graph size and match statistics"),
    (
        "set-status",
        "t",
        "PATH up|down|degraded|failing|unknown|null",
        "State: set the state of a resource (only up offers units to new work)",
    ),
    ("get-status", "e", "PATH", "State: print the state of a resource"),
    ("set-property", "p", "PATH KEY=VALUE", "set a property of a resource"),
    ("get-property", "g", "PATH", "print the properties of a resource"),
    (
        "tag",
        "tg",
        "PATH KEY[=VALUE]",
        "Tag(K, [V]): tag a resource, with an optional value",
    ),
    ("untag", "ut", "PATH KEY", "remove a tag"),
    ("get-tags", "gt", "PATH", "print the tags of a resource"),
    (
        "stage",
        "sg",
        "PATH",
        "Staged: lock a resource while it is considered for a job (it leaves Available; allocate may still take it)",
    ),
    ("unstage", "us", "PATH|all", "clear the staged lock"),
    (
        "remove",
        "rm",
        "PATH",
        "Unlink: unlink a resource and everything below it (alias: unlink)",
    ),
    (
        "attach",
        "j",
        "FILE [PATH]",
        "Merge: merge the resources of an R, JGF or hwloc file (at PATH) (alias: merge)",
    ),
    (
        "save",
        "sv",
        "FILE",
        "Serialize: write the whole state (JGF with allocation and reservation records, tags, states) to FILE, for --load",
    ),
    ("help", "h", "[COMMAND]", "list the commands"),
    ("quit", "q", "", "stop"),
];

/// The command list for `--help`, built from the command table.
pub fn commands_help() -> String {
    let mut s = String::from("Commands (one per line; abbreviations in parentheses):\n");
    for &(name, abbr, args, _) in COMMANDS {
        let _ = writeln!(s, "  {}", format!("{name} ({abbr}) {args}").trim_end());
    }
    s.push_str(
        "Blank lines and lines starting with '#' are ignored.  `help COMMAND`
describes one command.

Exit status: 0 when every command succeeded; 1 when loading failed or any
command failed (it is reported and the next commands still run); 2 for a
usage error.  A match that finds no resources is an answer, not a failure.",
    );
    s
}

/// A failed command: the message (without the `ERROR: ` prefix).
struct CmdError(String);

impl From<ModelError> for CmdError {
    fn from(e: ModelError) -> Self {
        CmdError(e.to_string())
    }
}

type CmdResult = Result<(), CmdError>;

fn fail<T>(msg: impl Into<String>) -> Result<T, CmdError> {
    Err(CmdError(msg.into()))
}

/// A loaded graph and the state of the jobs scheduled on it.
pub struct Session {
    g: Graph,
    format: Format,
    json: bool,
    next_jobid: u64,
    jobs: BTreeMap<u64, JobRec>,
    /// Match timings (seconds) of the jobs matched: min, max, sum.
    perf: Option<(f64, f64, f64)>,
    load_format: LoadFormat,
    rank: i64,
    /// `--follow`: the acquire state (its graph is `g`, swapped in while a
    /// follower method runs).
    follower: Option<super::follower::Follower>,
}

/// Text output of one command, and its JSON form.
struct Reply {
    text: String,
    json: Map<String, Value>,
}

impl Reply {
    fn new(command: &str) -> Reply {
        let mut json = Map::new();
        json.insert("command".into(), Value::String(command.into()));
        Reply {
            text: String::new(),
            json,
        }
    }
    fn set(&mut self, k: &str, v: impl Into<Value>) {
        self.json.insert(k.into(), v.into());
    }
    fn line(&mut self, s: impl AsRef<str>) {
        self.text.push_str(s.as_ref());
        self.text.push('\n');
    }
    fn banner(&mut self, lines: &[String]) {
        self.line("INFO: =============================");
        for l in lines {
            self.line(format!("INFO: {l}"));
        }
        self.line("INFO: =============================");
    }
}

impl Session {
    pub fn new(g: Graph, format: Format, json: bool) -> Session {
        let mut s = Session::empty(g, format, json);
        // A saved state brings its jobs: list them, number new ones after.
        for j in s.g.jobs() {
            s.track(j.id, "loaded");
        }
        s
    }

    fn empty(g: Graph, format: Format, json: bool) -> Session {
        Session {
            g,
            format,
            json,
            next_jobid: 1,
            jobs: BTreeMap::new(),
            perf: None,
            load_format: LoadFormat::Auto,
            rank: 0,
            follower: None,
        }
    }

    /// How `attach` reads its files.
    pub fn set_load_options(&mut self, fmt: LoadFormat, rank: i64) {
        self.load_format = fmt;
        self.rank = rank;
    }

    #[cfg(test)]
    pub fn graph(&self) -> &Graph {
        &self.g
    }

    /// Follow an acquire: the graph is built by its first response.
    pub fn follow(&mut self, group: Option<&str>) {
        self.follower = Some(super::follower::Follower::new(group));
    }

    /// Run `f` on the follower holding the session's graph.
    fn with_follower<R>(
        &mut self,
        f: impl FnOnce(&mut super::follower::Follower) -> R,
    ) -> Option<R> {
        let fl = self.follower.as_mut()?;
        std::mem::swap(&mut self.g, fl.graph_mut());
        let out = f(fl);
        std::mem::swap(&mut self.g, fl.graph_mut());
        Some(out)
    }

    /// Apply one `resource.acquire` response (see [`super::follower::Follower`]).
    pub fn apply_acquire(&mut self, payload: &Value) -> Result<super::follower::Applied, String> {
        let res = self
            .with_follower(|f| f.apply(payload))
            .ok_or_else(|| "not following an acquire".to_string())?;
        let a = res.map_err(|e| e.to_string())?;
        if a.built {
            for j in self.g.jobs() {
                self.track(j.id, "adopted");
            }
        }
        Ok(a)
    }

    /// The connection to the service was lost: the next response starts
    /// over (the jobs are kept).
    pub fn restart_follow(&mut self) {
        self.with_follower(|f| f.restart());
    }

    /// Shrunk targets now free, to release (groups variant).
    pub fn releasable(&self) -> Option<(String, idset::IdSet)> {
        let f = self.follower.as_ref()?;
        if f.view().is_v1() || f.releasable().is_empty() {
            return None;
        }
        Some((f.group().to_string(), f.releasable().clone()))
    }

    /// Note a successful `resource.release`.
    pub fn released(&mut self, targets: &idset::IdSet) -> Result<(), String> {
        match self.follower.as_mut() {
            Some(f) => f.released(targets).map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }

    /// Has the followed acquire built the graph yet?
    pub fn follow_ready(&self) -> bool {
        self.follower.as_ref().is_none_or(|f| f.is_built())
    }

    /// After frees: unlink shrunk targets no job holds any more.
    fn settle(&mut self) {
        self.with_follower(|f| f.settle());
    }

    /// Run one command line, writing its result to `out` and errors to
    /// `err` (to `out` as JSON with `--json`).
    pub fn run_line(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Outcome {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return Outcome::Ok;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(&first) = words.first() else {
            return Outcome::Ok;
        };
        let name = canonical(first);
        if name == Some("quit") {
            return Outcome::Quit;
        }
        let mut reply = Reply::new(name.unwrap_or(first));
        let res = match name {
            None => fail(format!("unknown command '{first}' (try 'help')")),
            Some(n) => self.dispatch(n, &words, &mut reply),
        };
        match res {
            Ok(()) => {
                let _ = if self.json {
                    writeln!(out, "{}", Value::Object(reply.json))
                } else {
                    out.write_all(reply.text.as_bytes())
                };
                Outcome::Ok
            }
            Err(CmdError(msg)) => {
                if self.json {
                    let _ = writeln!(out, "{}", json!({"command": line, "error": msg}));
                } else {
                    // Whatever the command printed before failing goes first.
                    let _ = out.write_all(reply.text.as_bytes());
                    let _ = out.flush();
                    let _ = writeln!(err, "ERROR: {msg}");
                }
                Outcome::Failed
            }
        }
    }

    fn dispatch(&mut self, name: &str, w: &[&str], r: &mut Reply) -> CmdResult {
        let args = w.get(1..).unwrap_or(&[]);
        let usage = || -> CmdResult {
            let spec = COMMANDS.iter().find(|c| c.0 == name).map_or("", |c| c.2);
            fail(format!("malformed command: usage: {name} {spec}"))
        };
        match (name, args) {
            ("match", [sub, file]) => self.cmd_match(sub, file, r),
            ("free", [j]) => self.cmd_free(j, r),
            ("free", [p, j] | [p, j, _]) => self.cmd_free_at(p, j, args.get(2).copied(), r),
            ("allocate", [p, n, j]) => self.cmd_allocate(p, n, j, r),
            ("reserve", [p, n, j, s, e]) => self.cmd_reserve(p, n, j, s, e, r),
            ("promote", [j]) => {
                let jobid = parse_jobid(j)?;
                self.g.promote(jobid)?;
                self.track(jobid, "promote");
                r.set("jobid", jobid);
                r.set("kind", "allocated");
                Ok(())
            }
            ("duplicate", []) => {
                let v = self.g.duplicate().to_jgf(JgfStyle::Full);
                r.line(rset::json::dumps(&v));
                r.set("jgf", v);
                Ok(())
            }
            ("size" | "allocated" | "available", [p]) => {
                let v = self.vertex(p)?;
                let n = match name {
                    "size" => self.g.size(v)?,
                    "allocated" => self.g.allocated(v)?,
                    _ => self.g.available(v)?,
                };
                r.line(format!("{p}: {name} {n}"));
                r.set("path", *p);
                r.set(name, n);
                Ok(())
            }
            ("pool", [p]) => self.cmd_pool(p, r),
            ("tag", [p, kv]) => {
                let v = self.vertex(p)?;
                let (k, val) = match kv.split_once('=') {
                    Some((k, val)) => (k, Some(val)),
                    None => (*kv, None),
                };
                if k.is_empty() {
                    return fail(format!("empty tag key in '{kv}': use tag PATH KEY[=VALUE]"));
                }
                self.g.tag(v, k, val)?;
                r.set("path", *p);
                r.set("tag", k);
                r.set("value", val);
                Ok(())
            }
            ("untag", [p, k]) => {
                let v = self.vertex(p)?;
                if !self.g.untag(v, k)? {
                    return fail(format!("{p} has no tag '{k}'"));
                }
                r.set("path", *p);
                r.set("tag", *k);
                Ok(())
            }
            ("get-tags", [p]) => {
                let v = self.vertex(p)?;
                let pool = self.g.try_get(v)?;
                let mut tags: Vec<(&str, Option<&str>)> = pool.tags().collect();
                tags.sort_unstable();
                let mut m = Map::new();
                if tags.is_empty() {
                    r.line(format!("No tags were found for {p}."));
                }
                for (k, val) in tags {
                    match val {
                        Some(val) => r.line(format!("{k}={val}")),
                        None => r.line(k),
                    }
                    m.insert(k.into(), val.into());
                }
                r.set("path", *p);
                r.set("tags", m);
                Ok(())
            }
            ("stage", [p]) => {
                let v = self.vertex(p)?;
                self.g.stage(v)?;
                r.set("path", *p);
                r.set("staged", true);
                Ok(())
            }
            ("unstage", [p]) => {
                if *p == "all" {
                    self.g.unstage_all();
                } else {
                    let v = self.vertex(p)?;
                    self.g.unstage(v)?;
                }
                r.set("path", *p);
                r.set("staged", false);
                Ok(())
            }
            ("save", [f]) => self.cmd_save(f, r),
            ("find", a) if !a.is_empty() => self.cmd_find(&a.join(" "), r),
            ("aggregate", [] | [_]) => self.cmd_aggregate(args.first().copied(), r),
            ("copy", [] | [_]) => self.cmd_copy(args.first().copied(), r),
            ("info", [j]) => self.cmd_info(j, r),
            ("list", []) => {
                let mut jobs = Vec::new();
                for (&id, rec) in &self.jobs {
                    r.line(info_line(id, rec));
                    jobs.push(info_json(id, rec));
                }
                r.set("jobs", jobs);
                Ok(())
            }
            ("stat", []) => self.cmd_stat(r),
            ("set-status", [p, s]) => self.cmd_set_status(p, s, r),
            ("get-status", [p]) => {
                let v = self.vertex(p)?;
                let st = self.g.try_get(v)?.state().as_str();
                r.line(format!("{p} is {st}"));
                r.set("path", *p);
                r.set("status", st);
                Ok(())
            }
            ("set-property", [p, kv]) => self.cmd_set_property(p, kv, r),
            ("get-property", [p]) => self.cmd_get_property(p, r),
            ("remove", [p]) => {
                let n = self.g.unlink_path(p)?;
                r.set("path", *p);
                r.set("removed", n);
                Ok(())
            }
            ("attach", [f] | [f, _]) => self.cmd_attach(f, args.get(1).copied(), r),
            ("help", [] | [_]) => cmd_help(args.first().copied(), r),
            _ => usage(),
        }
    }

    fn vertex(&self, path: &str) -> Result<model::VertexId, CmdError> {
        self.g
            .lookup(path)
            .ok_or_else(|| CmdError(ModelError::NoPath(path.into()).to_string()))
    }

    fn cmd_match(&mut self, sub: &str, file: &str, r: &mut Reply) -> CmdResult {
        #[derive(PartialEq)]
        enum Op {
            Allocate,
            AllocateSat,
            Sat,
        }
        let op = match sub {
            "allocate" => Op::Allocate,
            "allocate_with_satisfiability" => Op::AllocateSat,
            "satisfiability" => Op::Sat,
            _ => return fail(format!("unknown subcmd {sub}")),
        };
        r.set("command", format!("match {sub}"));
        r.set("jobspec", file);
        let text = std::fs::read_to_string(file)
            .map_err(|e| CmdError(format!("can't open {file}: {e}")))?;
        let req = Request::from_jobspec_str(&text).map_err(|e| CmdError(format!("{file}: {e}")))?;
        if op == Op::Sat {
            let sat = self.g.satisfiable(&req);
            r.set("satisfiable", sat);
            r.banner(&[format!(
                "{} request",
                if sat { "Satisfiable" } else { "Unsatisfiable" }
            )]);
            return Ok(());
        }
        let jobid = self.next_jobid;
        let t0 = Instant::now();
        let m = self.g.match_allocate(&req, jobid)?;
        let elapsed = t0.elapsed().as_secs_f64();
        self.next_jobid += 1;
        r.set("jobid", jobid);
        if m.is_none() {
            let mut lines = vec!["No matching resources found".to_string()];
            r.set("status", "NOMATCH");
            if op == Op::AllocateSat {
                let sat = self.g.satisfiable(&req);
                r.set("satisfiable", sat);
                if !sat {
                    lines.push("Unsatisfiable request".into());
                }
            }
            lines.push(format!("JOBID={jobid}"));
            r.banner(&lines);
            return Ok(());
        }
        let at = 0i64;
        let duration = req.duration;
        let job_g = self.g.job_graph(jobid)?;
        let mut rv =
            Rset::from_json(&self.g.to_r(Some(jobid))?).map_err(|e| CmdError(format!("R: {e}")))?;
        rv.set_starttime(at as f64);
        rv.set_expiration(if duration > 0.0 {
            at as f64 + duration
        } else {
            0.0
        });
        self.emit_graph(&job_g, Some(rv), r);
        r.set("status", "ALLOCATED");
        r.set("at", at);
        r.banner(&[
            format!("JOBID={jobid}"),
            "RESOURCES=ALLOCATED".into(),
            "SCHEDULED AT=Now".into(),
        ]);
        self.jobs.insert(
            jobid,
            JobRec {
                state: JobState::Allocated,
                at,
                jobspec: file.to_string(),
                overhead: elapsed,
            },
        );
        self.perf = Some(match self.perf {
            None => (elapsed, elapsed, elapsed),
            Some((lo, hi, sum)) => (lo.min(elapsed), hi.max(elapsed), sum + elapsed),
        });
        Ok(())
    }

    /// Write a graph-valued result in the session's format.  `r` is the R
    /// to print (computed from `g` when `None`).
    fn emit_graph(&self, g: &Graph, r: Option<Rset>, reply: &mut Reply) {
        if g.is_empty() {
            // Nothing found: no document (null in JSON).
            let key = if self.format == Format::Jgf {
                "jgf"
            } else {
                "R"
            };
            reply.set(key, Value::Null);
            return;
        }
        let jgf = || g.to_jgf(JgfStyle::Scheduling);
        let r_of = |r: Option<Rset>| -> Result<Rset, String> {
            match r {
                Some(r) => Ok(r),
                None => {
                    let v = g.to_r(None).map_err(|e| e.to_string())?;
                    Rset::from_json(&v).map_err(|e| format!("R: {e}"))
                }
            }
        };
        let value = match self.format {
            Format::Jgf => {
                let v = jgf();
                reply.set("jgf", v.clone());
                v
            }
            Format::Rv1Nosched | Format::Rv1 => match r_of(r) {
                Ok(mut rs) => {
                    if self.format == Format::Rv1 {
                        rs.set_scheduling(Some(jgf()));
                    }
                    let v = rs.to_json();
                    reply.set("R", v.clone());
                    v
                }
                Err(e) => {
                    // A graph without node pools has no R; show its JGF.
                    reply.set("R_error", e);
                    let v = jgf();
                    reply.set("jgf", v.clone());
                    v
                }
            },
        };
        reply.line(rset::json::dumps(&value));
    }

    fn cmd_free(&mut self, j: &str, r: &mut Reply) -> CmdResult {
        let jobid = parse_jobid(j)?;
        // Jobs loaded from a saved state are known to the graph only.
        if self.g.job(jobid).is_none() {
            return fail(format!("nonexistent job {jobid}"));
        }
        self.g.free_job(jobid)?;
        self.track(jobid, "free");
        self.settle();
        r.set("jobid", jobid);
        r.set("status", JobState::Canceled.as_str());
        Ok(())
    }

    /// Note a job made by allocate/reserve/promote in the job list.
    fn track(&mut self, jobid: u64, how: &str) {
        self.next_jobid = self.next_jobid.max(jobid.saturating_add(1));
        let live = self.g.job(jobid).is_some();
        let rec = self.jobs.entry(jobid).or_insert_with(|| JobRec {
            state: JobState::Allocated,
            at: 0,
            jobspec: how.to_string(),
            overhead: 0.0,
        });
        rec.state = if live {
            match self.g.job(jobid).map(|j| j.kind) {
                Some(model::JobKind::Reserved) => JobState::Reserved,
                _ => JobState::Allocated,
            }
        } else {
            JobState::Canceled
        };
    }

    fn cmd_free_at(&mut self, p: &str, j: &str, n: Option<&str>, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let jobid = parse_jobid(j)?;
        let n = n.map(parse_units).transpose()?;
        let freed = self.g.free(v, jobid, n)?;
        self.track(jobid, "free");
        self.settle();
        r.line(format!("{p}: freed {freed} units of job {jobid}"));
        r.set("path", p);
        r.set("jobid", jobid);
        r.set("freed", freed);
        r.set(
            "status",
            self.jobs
                .get(&jobid)
                .map_or("CANCELED", |x| x.state.as_str()),
        );
        Ok(())
    }

    fn cmd_allocate(&mut self, p: &str, n: &str, j: &str, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let n = parse_units(n)?;
        let jobid = parse_jobid(j)?;
        self.g.allocate(v, n, jobid)?;
        self.track(jobid, "allocate");
        let held = self
            .g
            .allocations(v)?
            .iter()
            .find(|e| e.0 == jobid)
            .map_or(0, |e| e.1);
        r.line(format!("{p}: job {jobid} holds {held} units"));
        r.set("path", p);
        r.set("jobid", jobid);
        r.set("held", held);
        r.set("available", self.g.available(v)?);
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn cmd_reserve(
        &mut self,
        p: &str,
        n: &str,
        j: &str,
        start: &str,
        end: &str,
        r: &mut Reply,
    ) -> CmdResult {
        let v = self.vertex(p)?;
        let n = parse_units(n)?;
        let jobid = parse_jobid(j)?;
        let time = |s: &str| {
            s.parse::<u64>()
                .map_err(|_| CmdError(format!("invalid time '{s}' (an integer)")))
        };
        let (s0, e0) = (time(start)?, time(end)?);
        self.g.reserve(v, n, jobid, s0, e0)?;
        self.track(jobid, "reserve");
        r.line(format!(
            "{p}: job {jobid} reserves {n} units during [{s0}, {e0})"
        ));
        r.set("path", p);
        r.set("jobid", jobid);
        r.set("units", n);
        r.set("start", s0);
        r.set("end", e0);
        Ok(())
    }

    fn cmd_pool(&mut self, p: &str, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let g = &self.g;
        let x = g.try_get(v)?;
        let jobs = |l: Vec<(u64, u64)>| -> Value {
            Value::Object(
                l.into_iter()
                    .map(|(j, n)| (j.to_string(), json!(n)))
                    .collect(),
            )
        };
        let props: Map<String, Value> = x
            .properties()
            .map(|(k, v)| (k.to_string(), Value::String(v.into())))
            .collect();
        let tags: Map<String, Value> = x
            .tags()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect();
        let children: Vec<String> = x.children().filter_map(|c| g.path(c)).collect();
        let o = json!({
            "path": p,
            "type": x.type_name(),
            "uuid": x.uuid(),
            "basename": x.basename(),
            "name": x.name(),
            "id": x.id(),
            "rank": x.rank(),
            "uri": x.uri(),
            "parent": x.parent().and_then(|q| g.path(q)),
            "children": children,
            "properties": props,
            "tags": tags,
            "size": x.size(),
            "unit": x.unit(),
            "state": x.state().as_str(),
            "staged": x.staged(),
            "exclusive": g.exclusive(v)?,
            "allocated": g.allocated(v)?,
            "available": g.available(v)?,
            "allocations": jobs(g.allocations(v)?),
            "reservations": jobs(g.reservations(v)?),
            "shared": g.shared(v)?,
            "reserved_shared": g.reserved_shared(v)?,
        });
        if let Value::Object(m) = o {
            for (k, val) in m {
                if k != "path" {
                    let shown = match &val {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    r.line(format!("{k}: {shown}"));
                }
                r.set(&k, val);
            }
        }
        Ok(())
    }

    fn cmd_save(&mut self, f: &str, r: &mut Reply) -> CmdResult {
        let text = self.g.to_jgf_string(JgfStyle::Full);
        // The store's write-rename: written beside, fsynced, renamed,
        // the directory fsynced; a crash leaves the old file or the new.
        let path = std::path::Path::new(f);
        if let Err(e) = store::write_file_atomic(&store::RealFs, path, text.as_bytes()) {
            return fail(format!("can't write {f}: {e}"));
        }
        r.line(format!(
            "saved {} vertices and {} jobs to {f}",
            self.g.len(),
            self.g.jobs().len()
        ));
        r.set("file", f);
        r.set("vertices", self.g.len());
        r.set("jobs", self.g.jobs().len());
        Ok(())
    }

    fn cmd_find(&mut self, expr: &str, r: &mut Reply) -> CmdResult {
        let p = Pred::parse(expr)?;
        let found = self.g.find(&p);
        r.set("expression", expr);
        r.set("count", found.len());
        self.emit_graph(&found, None, r);
        r.banner(&[format!("EXPRESSION=\"{expr}\"")]);
        Ok(())
    }

    fn cmd_aggregate(&mut self, path: Option<&str>, r: &mut Reply) -> CmdResult {
        let (agg, at) = match path {
            Some(p) => (self.g.aggregate(self.vertex(p)?)?, p.to_string()),
            None => (
                self.g.aggregate_all(),
                self.g
                    .containment_root()
                    .and_then(|v| self.g.path(v))
                    .unwrap_or_else(|| "/".into()),
            ),
        };
        let mut m = Map::new();
        for (t, n) in &agg {
            r.line(format!("{t}: {n}"));
            m.insert(t.clone(), json!(n));
        }
        r.set("path", at);
        r.set("aggregate", m);
        Ok(())
    }

    fn cmd_copy(&mut self, path: Option<&str>, r: &mut Reply) -> CmdResult {
        let c = match path {
            Some(p) => self.g.copy(self.vertex(p)?)?,
            None => self.g.copy_all(),
        };
        if let Some(p) = path {
            r.set("path", p);
        }
        self.emit_graph(&c, None, r);
        Ok(())
    }

    fn cmd_info(&mut self, j: &str, r: &mut Reply) -> CmdResult {
        let jobid = parse_jobid(j)?;
        let Some(rec) = self.jobs.get(&jobid) else {
            return fail(format!("nonexistent job {jobid}"));
        };
        r.line(info_line(jobid, rec));
        if let Value::Object(o) = info_json(jobid, rec) {
            for (k, v) in o {
                r.set(&k, v);
            }
        }
        Ok(())
    }

    fn cmd_stat(&mut self, r: &mut Reply) -> CmdResult {
        let vertices = self.g.len();
        let edges = vertices.saturating_sub(self.g.roots().count()) + self.g.edges().count();
        let njobs = self.jobs.len();
        let (min, max, avg) = match self.perf {
            Some((lo, hi, sum)) => (lo, hi, sum / njobs.max(1) as f64),
            None => (0.0, 0.0, 0.0),
        };
        r.line(format!("INFO: Num. of Vertices: {vertices}"));
        r.line(format!("INFO: Num. of Edges: {edges}"));
        r.line(format!("INFO: Num. of Jobs Matched: {njobs}"));
        r.line(format!("INFO: Min. Match Time: {}", fmt_g(min)));
        r.line(format!("INFO: Max. Match Time: {}", fmt_g(max)));
        r.line(format!("INFO: Avg. Match Time: {}", fmt_g(avg)));
        r.set("vertices", vertices);
        r.set("edges", edges);
        r.set("jobs", njobs);
        r.set("min", min);
        r.set("max", max);
        r.set("avg", avg);
        Ok(())
    }

    fn cmd_set_status(&mut self, p: &str, s: &str, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let Some(st) = State::parse(s) else {
            return fail(format!("unrecognized status '{s}'"));
        };
        self.g.set_state(v, st)?;
        r.set("path", p);
        r.set("status", st.as_str());
        Ok(())
    }

    fn cmd_set_property(&mut self, p: &str, kv: &str, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let (k, val) = match kv.split_once('=') {
            Some((k, val)) if !k.is_empty() && !val.is_empty() => (k, val),
            _ => {
                return fail(format!(
                    "incorrect input format '{kv}': use set-property PATH PROPERTY=VALUE"
                ))
            }
        };
        self.g.set_property(v, k, val)?;
        r.set("path", p);
        r.set("property", k);
        r.set("value", val);
        Ok(())
    }

    fn cmd_get_property(&mut self, p: &str, r: &mut Reply) -> CmdResult {
        let v = self.vertex(p)?;
        let pool = self.g.try_get(v)?;
        let mut props: Vec<(&str, &str)> = pool.properties().collect();
        props.sort_unstable();
        let mut m = Map::new();
        if props.is_empty() {
            r.line(format!(
                "No properties were found for {p} (vtx's uniq_id={}).",
                pool.uniq_id()
            ));
        }
        for (k, val) in props {
            r.line(format!("{k}={val}"));
            m.insert(k.to_string(), Value::String(val.to_string()));
        }
        r.set("path", p);
        r.set("properties", m);
        Ok(())
    }

    fn cmd_attach(&mut self, file: &str, at: Option<&str>, r: &mut Reply) -> CmdResult {
        let hw = HwlocOptions {
            rank: self.rank,
            hostname: Some(super::local_hostname()),
            sockets: true,
        };
        let other = super::load_file(file, self.load_format, &hw).map_err(CmdError)?;
        let added = self.g.merge(&other, at)?;
        r.set("file", file);
        if let Some(p) = at {
            r.set("path", p);
        }
        r.set("added", added.len());
        Ok(())
    }
}

fn cmd_help(which: Option<&str>, r: &mut Reply) -> CmdResult {
    let mut list = Vec::new();
    for &(name, abbr, args, note) in COMMANDS {
        if which.is_some_and(|w| canonical(w) != Some(name)) {
            continue;
        }
        r.line(format!("INFO: {name} ({abbr}) {args} -- {note}"));
        list.push(json!({"name": name, "abbr": abbr, "args": args, "description": note}));
    }
    if list.is_empty() {
        return fail(format!("unknown command: {}", which.unwrap_or("")));
    }
    r.set("commands", list);
    Ok(())
}

/// The command a word names (full name, abbreviation or alias).
fn canonical(w: &str) -> Option<&'static str> {
    match w {
        "cancel" => return Some("free"),
        "unlink" => return Some("remove"),
        "merge" => return Some("attach"),
        _ => {}
    }
    COMMANDS.iter().find(|c| c.0 == w || c.1 == w).map(|c| c.0)
}

fn parse_units(s: &str) -> Result<u64, CmdError> {
    s.parse::<u64>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| CmdError(format!("invalid unit count '{s}' (a positive integer)")))
}

fn parse_jobid(s: &str) -> Result<u64, CmdError> {
    s.parse::<u64>()
        .map_err(|_| CmdError(format!("invalid jobid '{s}'")))
}

/// resource-query's `INFO: <jobid>, <state>, <at>, <jobspec>, <overhead>`.
fn info_line(id: u64, rec: &JobRec) -> String {
    format!(
        "INFO: {id}, {}, {}, {}, {}",
        rec.state.as_str(),
        rec.at,
        rec.jobspec,
        fmt_g(rec.overhead)
    )
}

fn info_json(id: u64, rec: &JobRec) -> Value {
    json!({"jobid": id, "status": rec.state.as_str(), "at": rec.at,
           "jobspec": rec.jobspec, "overhead": rec.overhead})
}

/// A double as C++ streams print it by default (`%g`: 6 significant
/// digits, trailing zeros dropped, exponent form below 1e-4 or from 1e6).
pub(crate) fn fmt_g(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // Exponent after rounding to 6 significant digits.
    let sci = format!("{x:.5e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let mut out = trim(mant);
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
        out
    } else {
        let decimals = usize::try_from(5 - exp).unwrap_or(0);
        trim(&format!("{x:.decimals$}"))
    }
}

#[cfg(test)]
mod tests;
