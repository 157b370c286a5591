//! JSON Graph Format (RFC 20 `scheduling`, RFC 40) for the resource graph.
//!
//! # Writing
//! Every vertex carries the RFC 20 keys (`type`, `uuid`, `basename`,
//! `name`, `id`, `properties`, `size`, `unit`) and `uniq_id`, `rank`,
//! `exclusive` and `paths` (what Fluxion's reader takes); every edge
//! carries `metadata.subsystem` and `metadata.relationship`.
//! * [`JgfStyle::Full`] — lossless serialization (RFC 4 Serialize): the
//!   resources and their scheduling state: `status`/`state`, and when
//!   present `tags`, `staged`, `allocations`, `reservations` and
//!   (informational, recomputed on load) `shared`/`reserved_shared`.  Job
//!   windows other than the default ("now, until freed") and a
//!   non-default hierarchy name go in `graph.metadata`.  Fluxion reads
//!   this form (it ignores keys it does not know).
//! * [`JgfStyle::Scheduling`] — the resources alone, for an R's
//!   `scheduling` key: no scheduling state.  (Fluxion's own writer leaves
//!   defaulted keys and containment edge metadata out; RFC 20 requires
//!   them, so Roster writes them.)
//!
//! # Reading ([`Graph::from_jgf`])
//! Accepts both forms and Fluxion's older verbose form, applying Fluxion's
//! reader defaults: `uniq_id` from the metadata or else from the vertex
//! `id` string; `id` from `uniq_id`, or for a `node` with a name ending in
//! digits, those digits; `basename` = type; `name` = basename + id; `size`
//! 1; `unit` ""; `exclusive` false; edge `subsystem` = containment, edge
//! `relationship` = `contains` (`supplies_to` in the power subsystem).  Edge
//! metadata of the 2022 form `{"name": {"containment": "contains"}}` is
//! understood; containment edges with relationship `in` (the reverse
//! direction) are ignored.  Unknown vertex keys are kept and written back.

use crate::alloc::{JobId, JobKind, FOREVER};
use crate::graph::{flag, Edge, Graph, Pool, State, VertexId, NONE};
use crate::intern::Sym;
use crate::ModelError;
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt::Write as _;

/// RFC 20's check of a JGF document (`{"graph": {"nodes", "edges"}}`):
/// every vertex has an `id` and `metadata` with the RFC 20 keys (plus
/// `rank`, `paths` and `exclusive`, which Fluxion reads), every edge
/// `source`, `target` and `metadata` with `subsystem` and `relationship`.
/// The error names the first vertex or edge and the key it lacks.
pub fn check_rfc20(v: &Value) -> Result<(), String> {
    const VERTEX: &[&str] = &[
        "type",
        "uuid",
        "basename",
        "name",
        "id",
        "properties",
        "size",
        "unit",
        "rank",
        "paths",
        "exclusive",
    ];
    let graph = v.get("graph").ok_or("no graph key")?;
    let nodes = graph.get("nodes").and_then(Value::as_array);
    let edges = graph.get("edges").and_then(Value::as_array);
    let (Some(nodes), Some(edges)) = (nodes, edges) else {
        return Err("graph.nodes and graph.edges must be arrays".into());
    };
    for (n, vx) in nodes.iter().enumerate() {
        if !vx.get("id").is_some_and(Value::is_string) {
            return Err(format!("vertex {n}: no string id"));
        }
        let meta = vx
            .get("metadata")
            .ok_or(format!("vertex {n}: no metadata"))?;
        if let Some(k) = VERTEX.iter().find(|k| meta.get(**k).is_none()) {
            return Err(format!("vertex {n} ({}): no metadata.{k}", vx["id"]));
        }
    }
    for (n, e) in edges.iter().enumerate() {
        for k in ["source", "target"] {
            if !e.get(k).is_some_and(Value::is_string) {
                return Err(format!("edge {n}: no string {k}"));
            }
        }
        for k in ["subsystem", "relationship"] {
            if !e
                .get("metadata")
                .and_then(|m| m.get(k))
                .is_some_and(Value::is_string)
            {
                return Err(format!("edge {n}: no metadata.{k}"));
            }
        }
    }
    Ok(())
}

/// Which JGF dialect to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JgfStyle {
    /// Resources and scheduling state (allocations, reservations, states).
    Full,
    /// Resources only, as an R's `scheduling` carries them.
    Scheduling,
}

/// Keys the reader understands (anything else is kept verbatim).
const KNOWN: &[&str] = &[
    "type",
    "uuid",
    "basename",
    "name",
    "id",
    "uniq_id",
    "rank",
    "status",
    "state",
    "exclusive",
    "unit",
    "size",
    "paths",
    "properties",
    "tags",
    "staged",
    "allocations",
    "reservations",
    "shared",
    "reserved_shared",
];

fn esc(out: &mut String, s: &str) {
    pycompat::repr::json_string(out, s, false);
}

struct Obj<'a> {
    out: &'a mut String,
    first: bool,
}

impl<'a> Obj<'a> {
    fn new(out: &'a mut String) -> Obj<'a> {
        out.push('{');
        Obj { out, first: true }
    }
    fn key(&mut self, k: &str) -> &mut String {
        if !self.first {
            self.out.push(',');
        }
        self.first = false;
        esc(self.out, k);
        self.out.push(':');
        self.out
    }
    fn str(&mut self, k: &str, v: &str) {
        let o = self.key(k);
        esc(o, v);
    }
    fn int(&mut self, k: &str, v: impl std::fmt::Display) {
        let o = self.key(k);
        let _ = write!(o, "{v}");
    }
    fn raw(&mut self, k: &str, v: &str) {
        self.key(k).push_str(v);
    }
    fn end(self) {
        self.out.push('}');
    }
}

fn job_map(list: &[(JobId, u64)]) -> String {
    let mut s = String::new();
    let mut o = Obj::new(&mut s);
    for &(j, n) in list {
        o.int(&j.to_string(), n);
    }
    o.end();
    s
}

/// Metadata key `k` read by `get` (`None` when absent); a value of
/// another type is an error naming `what` and `kind`.
fn metadata_key<'a, T>(
    md: &'a Map<String, Value>,
    k: &str,
    get: fn(&'a Value) -> Option<T>,
    kind: &str,
    what: &dyn Fn() -> String,
) -> Result<Option<T>, ModelError> {
    md.get(k)
        .map(|v| {
            get(v).ok_or_else(|| ModelError::Jgf(format!("{}: key '{k}' must be {kind}", what())))
        })
        .transpose()
}

impl Graph {
    /// Serialize as JGF text (compact JSON).
    pub fn to_jgf_string(&self, style: JgfStyle) -> String {
        let mut out = String::with_capacity(self.live * 160 + 64);
        let mut top = Obj::new(&mut out);
        {
            let o = top.key("graph");
            let mut graph = Obj::new(o);
            if style == JgfStyle::Full {
                let meta = self.graph_metadata();
                if !meta.is_empty() {
                    graph.raw("metadata", &meta);
                }
            }
            let o = graph.key("nodes");
            o.push('[');
            let mut first = true;
            for i in 0..self.v.len() as u32 {
                if !self.is_live(i) {
                    continue;
                }
                if !first {
                    o.push(',');
                }
                first = false;
                self.write_vertex(o, i, style);
            }
            o.push(']');
            let o = graph.key("edges");
            o.push('[');
            let mut first = true;
            let hier = self.hierarchy();
            for i in 0..self.v.len() as u32 {
                if !self.is_live(i) {
                    continue;
                }
                for c in self.kids(i) {
                    if !first {
                        o.push(',');
                    }
                    first = false;
                    let mut e = Obj::new(o);
                    e.str("source", &self.vid(i));
                    e.str("target", &self.vid(c.0));
                    let m = e.key("metadata");
                    let mut mo = Obj::new(m);
                    mo.str("subsystem", hier);
                    mo.str("relationship", "contains");
                    mo.end();
                    e.end();
                }
            }
            for ed in &self.edges {
                if !self.is_live(ed.src) || !self.is_live(ed.dst) {
                    continue;
                }
                if !first {
                    o.push(',');
                }
                first = false;
                let mut e = Obj::new(o);
                e.str("source", &self.vid(ed.src));
                e.str("target", &self.vid(ed.dst));
                let m = e.key("metadata");
                let mut mo = Obj::new(m);
                mo.str("subsystem", self.syms.resolve(ed.subsystem));
                mo.str("relationship", self.syms.resolve(ed.relationship));
                mo.end();
                e.end();
            }
            o.push(']');
            graph.end();
        }
        top.end();
        out
    }

    /// Serialize as a JSON value.
    pub fn to_jgf(&self, style: JgfStyle) -> Value {
        serde_json::from_str(&self.to_jgf_string(style)).unwrap_or(Value::Null)
    }

    /// The JGF vertex id: the explicit string UUID or the uniq id.
    fn vid(&self, i: u32) -> String {
        match self.uuids.get(&i) {
            Some(u) => u.to_string(),
            None => self.v[i as usize].uniq.to_string(),
        }
    }

    fn graph_metadata(&self) -> String {
        let mut s = String::new();
        let mut jobs: Vec<(JobId, JobKind, u64, u64)> = self
            .jobs
            .iter()
            .filter(|(_, j)| !(j.kind == JobKind::Allocated && j.start == 0 && j.end == FOREVER))
            .map(|(&id, j)| (id, j.kind, j.start, j.end))
            .collect();
        jobs.sort_unstable_by_key(|j| j.0);
        let custom_hier = self.hierarchy() != "containment";
        if jobs.is_empty() && !custom_hier {
            return s;
        }
        let mut o = Obj::new(&mut s);
        if custom_hier {
            o.str("hierarchy", self.hierarchy());
        }
        if !jobs.is_empty() {
            let jo = o.key("jobs");
            let mut jm = Obj::new(jo);
            for (id, kind, start, end) in jobs {
                let x = jm.key(&id.to_string());
                let mut e = Obj::new(x);
                e.str("kind", kind.as_str());
                e.int("start", start);
                if end == FOREVER {
                    e.raw("end", "null");
                } else {
                    e.int("end", end);
                }
                e.end();
            }
            jm.end();
        }
        o.end();
        s
    }

    fn write_vertex(&self, out: &mut String, i: u32, style: JgfStyle) {
        let x = &self.v[i as usize];
        let mut vo = Obj::new(out);
        vo.str("id", &self.vid(i));
        let m = vo.key("metadata");
        let mut o = Obj::new(m);
        let ty = self.syms.resolve(x.ty);
        let basename = self.syms.resolve(x.basename);
        let name = self.name_of(i);
        let unit = self.syms.resolve(x.unit);
        let full = style == JgfStyle::Full;
        // RFC 20's vertex keys, always (Fluxion reads `uniq_id` when the
        // vertex id is not a number, and `rank`, `exclusive`, `paths`).
        o.str("type", ty);
        o.str("uuid", &self.view(i).uuid());
        o.str("basename", basename);
        o.str("name", &name);
        o.int("id", x.id);
        o.int("uniq_id", x.uniq);
        o.int("rank", x.rank);
        {
            let po = o.key("properties");
            let mut p = Obj::new(po);
            for (k, v) in self.props.get(&i).into_iter().flatten() {
                p.str(self.syms.resolve(*k), v);
            }
            p.end();
        }
        o.str("unit", unit);
        let xmark = x.flags & flag::XMARK != 0;
        o.raw("exclusive", if xmark { "true" } else { "false" });
        o.int("size", x.size);
        {
            let po = o.key("paths");
            let mut p = Obj::new(po);
            if x.flags & flag::NO_CONTAINMENT == 0 {
                p.str(self.hierarchy(), &self.path_of(i));
            }
            for (k, v) in self.paths.get(&i).into_iter().flatten() {
                p.str(self.syms.resolve(*k), v);
            }
            p.end();
        }
        if full {
            match x.state {
                State::Up => o.int("status", 0),
                State::Down => o.int("status", 1),
                _ => {}
            }
            if x.state != State::Up {
                o.str("state", x.state.as_str());
            }
            if let Some(tags) = self.tags.get(&i).filter(|l| !l.is_empty()) {
                let to = o.key("tags");
                let mut t = Obj::new(to);
                for (k, v) in tags {
                    match v {
                        Some(v) => t.str(self.syms.resolve(*k), v),
                        None => t.raw(self.syms.resolve(*k), "null"),
                    }
                }
                t.end();
            }
            if x.flags & flag::STAGED != 0 {
                o.raw("staged", "true");
            }
            let (allocs, resv) = self.records_of(i);
            if !allocs.is_empty() {
                o.raw("allocations", &job_map(allocs));
            }
            if !resv.is_empty() {
                o.raw("reservations", &job_map(resv));
            }
            let vi = VertexId(i);
            for (key, list) in [
                ("shared", self.shared(vi).unwrap_or_default()),
                (
                    "reserved_shared",
                    self.reserved_shared(vi).unwrap_or_default(),
                ),
            ] {
                if !list.is_empty() {
                    let ids: Vec<String> = list.iter().map(|j| j.to_string()).collect();
                    o.raw(key, &format!("[{}]", ids.join(",")));
                }
            }
        }
        if let Some(extra) = self.extra.get(&i) {
            for (k, v) in extra {
                o.raw(
                    k,
                    &serde_json::to_string(v).unwrap_or_else(|_| "null".into()),
                );
            }
        }
        o.end();
        vo.end();
    }

    /// Parse JGF text (see the module documentation for the rules).
    pub fn from_jgf_str(s: &str) -> Result<Graph, ModelError> {
        let v: Value =
            serde_json::from_str(s).map_err(|e| ModelError::Jgf(format!("invalid JSON: {e}")))?;
        Graph::from_jgf(&v)
    }

    /// Build a graph from a JGF object `{"graph": {"nodes": [...], "edges": [...]}}`.
    pub fn from_jgf(v: &Value) -> Result<Graph, ModelError> {
        let err = |s: String| ModelError::Jgf(s);
        let graph = v
            .get("graph")
            .ok_or_else(|| err("missing required key 'graph'".into()))?;
        let nodes = graph
            .get("nodes")
            .and_then(Value::as_array)
            .ok_or_else(|| err("'graph' lacks a 'nodes' array".into()))?;
        let edges = graph
            .get("edges")
            .and_then(Value::as_array)
            .ok_or_else(|| err("'graph' lacks an 'edges' array".into()))?;
        let meta = graph.get("metadata");
        let mut g = Graph::with_capacity(nodes.len());
        if let Some(h) = meta.and_then(|m| m.get("hierarchy")) {
            let h = h
                .as_str()
                .ok_or_else(|| err("graph metadata 'hierarchy' must be a string".into()))?;
            g.set_hierarchy(h);
        }
        let windows = parse_jobs(meta)?;
        let hier = g.hierarchy().to_string();
        let mut by_id: HashMap<String, u32> = HashMap::with_capacity(nodes.len());
        let mut given_paths: Vec<Option<String>> = Vec::with_capacity(nodes.len());
        let mut records: Vec<(u32, JobKind, JobId, u64)> = Vec::new();
        let mut used_uniq: HashMap<i64, u32> = HashMap::new();
        let mut pending_uniq: Vec<u32> = Vec::new();
        for (n, node) in nodes.iter().enumerate() {
            let vid = node
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| err(format!("node {n}: vertex 'id' must be a string")))?;
            let what = || format!("node {n} (id \"{vid}\")");
            let md = node
                .get("metadata")
                .and_then(Value::as_object)
                .ok_or_else(|| err(format!("{}: missing 'metadata' object", what())))?;
            let s = |k| metadata_key(md, k, Value::as_str, "a string", &what);
            let int = |k| metadata_key(md, k, Value::as_i64, "an integer", &what);
            let boolean = |k| metadata_key(md, k, Value::as_bool, "a boolean", &what);
            let ty = s("type")?.ok_or_else(|| err(format!("{}: missing key 'type'", what())))?;
            let paths = md
                .get("paths")
                .and_then(Value::as_object)
                .ok_or_else(|| err(format!("{}: missing 'paths' object", what())))?;
            let basename = s("basename")?.unwrap_or(ty);
            let name = s("name")?;
            let uniq = match int("uniq_id")? {
                Some(u) => Some(u),
                None => vid.parse::<i64>().ok().filter(|u| u.to_string() == vid),
            };
            let id = match int("id")? {
                Some(i) => i,
                None => {
                    let suffix = (ty == "node")
                        .then_some(name)
                        .flatten()
                        .and_then(trailing_digits);
                    match (suffix, uniq) {
                        (Some(d), _) => d,
                        (None, Some(u)) => u,
                        (None, None) => {
                            return Err(err(format!(
                                "{}: no 'id', and no integer uniq id to default it from",
                                what()
                            )))
                        }
                    }
                }
            };
            let size = match int("size")? {
                None => 1,
                Some(s) if s >= 0 => s as u64,
                Some(s) => return Err(err(format!("{}: negative size {s}", what()))),
            };
            let rank = int("rank")?.unwrap_or(-1);
            let unit = s("unit")?.unwrap_or("");
            let state = match (s("state")?, int("status")?) {
                (Some(st), _) => State::parse(st)
                    .ok_or_else(|| err(format!("{}: unknown state '{st}'", what())))?,
                (None, None) | (None, Some(0)) => State::Up,
                (None, Some(1)) => State::Down,
                (None, Some(x)) => return Err(err(format!("{}: unknown status {x}", what()))),
            };
            let exclusive = boolean("exclusive")?.unwrap_or(false);
            let staged = boolean("staged")?.unwrap_or(false);
            // Fluxion's default name is basename + id, even for id -1.
            let name = name.map_or_else(|| format!("{basename}{id}"), str::to_string);
            let pool = Pool {
                ty: g.syms.intern(ty),
                basename: Some(g.syms.intern(basename)),
                name: Some(name),
                id: Some(id),
                rank: Some(rank),
                size,
                unit: g.syms.intern(unit),
                uniq_id: None,
                state,
            };
            let i = g.push_pool(pool, NONE, uniq.unwrap_or(0));
            if exclusive {
                g.v[i as usize].flags |= flag::XMARK;
            }
            if staged {
                g.v[i as usize].flags |= flag::STAGED;
            }
            match uniq {
                Some(u) => {
                    if used_uniq.insert(u, i).is_some() {
                        // Keep the duplicate's JGF id; give it a fresh uniq.
                        pending_uniq.push(i);
                        g.uuids.insert(i, vid.into());
                    }
                    if u >= g.next_uniq {
                        g.next_uniq = u.saturating_add(1);
                    }
                }
                None => pending_uniq.push(i),
            }
            if uniq.map(|u| u.to_string()).as_deref() != Some(vid) {
                g.uuids.insert(i, vid.into());
            }
            if let Some(u) = s("uuid")? {
                if u != vid {
                    g.uuids.insert(i, u.into());
                }
            }
            if by_id.insert(vid.to_string(), i).is_some() {
                return Err(err(format!("{}: duplicate vertex id", what())));
            }
            let mut cpath = None;
            for (k, pv) in paths {
                let p = pv
                    .as_str()
                    .ok_or_else(|| err(format!("{}: path for '{k}' must be a string", what())))?;
                if *k == hier {
                    cpath = Some(p.to_string());
                } else {
                    let ks = g.syms.intern(k);
                    g.paths.entry(i).or_default().push((ks, p.into()));
                }
            }
            if cpath.is_none() {
                g.v[i as usize].flags |= flag::NO_CONTAINMENT;
            }
            given_paths.push(cpath);
            match md.get("properties") {
                None | Some(Value::Null) => {}
                Some(Value::Object(pm)) => {
                    for (k, pv) in pm {
                        let pv = pv.as_str().ok_or_else(|| {
                            err(format!("{}: property '{k}' must be a string", what()))
                        })?;
                        let ks = g.syms.intern(k);
                        g.props.entry(i).or_default().push((ks, pv.into()));
                        g.v[i as usize].flags |= flag::HAS_PROPS;
                    }
                }
                Some(_) => {
                    return Err(err(format!(
                        "{}: key 'properties' must be an object or null",
                        what()
                    )))
                }
            }
            match md.get("tags") {
                None | Some(Value::Null) => {}
                Some(Value::Object(tm)) => {
                    for (k, tv) in tm {
                        let tv = match tv {
                            Value::Null => None,
                            Value::String(s) => Some(Box::from(s.as_str())),
                            _ => {
                                return Err(err(format!(
                                    "{}: tag '{k}' must be a string or null",
                                    what()
                                )))
                            }
                        };
                        let ks = g.syms.intern(k);
                        g.tags.entry(i).or_default().push((ks, tv));
                        g.v[i as usize].flags |= flag::HAS_TAGS;
                    }
                }
                Some(_) => return Err(err(format!("{}: key 'tags' must be an object", what()))),
            }
            for (key, kind) in [
                ("allocations", JobKind::Allocated),
                ("reservations", JobKind::Reserved),
            ] {
                match md.get(key) {
                    None | Some(Value::Null) => {}
                    Some(Value::Object(am)) => {
                        for (j, nv) in am {
                            let job: JobId = j.parse().map_err(|_| {
                                err(format!("{}: invalid job id '{j}' in '{key}'", what()))
                            })?;
                            let units = nv.as_u64().filter(|&u| u > 0).ok_or_else(|| {
                                err(format!(
                                    "{}: '{key}' of job {j} must be a positive integer",
                                    what()
                                ))
                            })?;
                            records.push((i, kind, job, units));
                        }
                    }
                    Some(_) => {
                        return Err(err(format!("{}: key '{key}' must be an object", what())))
                    }
                }
            }
            let mut extra = Map::new();
            for (k, xv) in md {
                if !KNOWN.contains(&k.as_str()) {
                    extra.insert(k.clone(), xv.clone());
                }
            }
            if !extra.is_empty() {
                g.extra.insert(i, extra);
            }
        }
        for i in pending_uniq {
            g.v[i as usize].uniq = g.next_uniq;
            g.next_uniq += 1;
        }
        // Edges.
        for (n, e) in edges.iter().enumerate() {
            let end = |k: &str| -> Result<u32, ModelError> {
                let s = e
                    .get(k)
                    .and_then(Value::as_str)
                    .ok_or_else(|| err(format!("edge {n}: '{k}' must be a string")))?;
                by_id
                    .get(s)
                    .copied()
                    .ok_or_else(|| err(format!("edge {n}: {k} vertex \"{s}\" not found")))
            };
            let src = end("source")?;
            let dst = end("target")?;
            let (sub, rel) =
                edge_meta(e.get("metadata"), &hier).map_err(|m| err(format!("edge {n}: {m}")))?;
            if sub == hier {
                if rel == "in" {
                    continue;
                }
                let cur = g.v[dst as usize].parent;
                if cur == src {
                    continue;
                }
                if cur != NONE {
                    return Err(err(format!(
                        "edge {n}: vertex \"{}\" has two {hier} parents",
                        g.vid(dst)
                    )));
                }
                if src == dst || g.ups(src).any(|a| a.0 == dst) {
                    return Err(err(format!(
                        "edge {n}: {hier} cycle through \"{}\"",
                        g.vid(dst)
                    )));
                }
                g.v[dst as usize].flags &= !flag::NO_CONTAINMENT;
                g.link_last(src, dst);
            } else {
                let s = g.syms.intern(&sub);
                let r = g.syms.intern(&rel);
                g.edges.push(Edge {
                    src,
                    dst,
                    subsystem: s,
                    relationship: r,
                });
            }
        }
        for i in 0..g.v.len() as u32 {
            if g.v[i as usize].parent == NONE {
                g.roots.push(i);
            }
        }
        // Explicit paths that differ from the derived ones.
        for (i, p) in given_paths.iter().enumerate() {
            let i = i as u32;
            if let Some(p) = p {
                if g.path_of_derived(i) != *p {
                    g.path_override.insert(i, p.as_str().into());
                }
            }
        }
        g.rebuild_aggregates();
        for (i, kind, job, units) in records {
            let w = match windows.get(&job) {
                Some(&(k, s, e)) if k == kind => (s, e),
                Some(&(k, _, _)) => {
                    return Err(err(format!(
                        "job {job} is {} in the job table but has {} records",
                        k.as_str(),
                        kind.as_str()
                    )))
                }
                None if kind == JobKind::Allocated => (0, FOREVER),
                None => {
                    return Err(err(format!(
                        "reservation of job {job} has no window in graph metadata"
                    )))
                }
            };
            g.record(VertexId(i), units, job, kind, w, true)
                .map_err(|e| err(format!("vertex \"{}\": {e}", g.vid(i))))?;
        }
        Ok(g)
    }

    /// Recompute every aggregate (after bulk construction).
    pub(crate) fn rebuild_aggregates(&mut self) {
        self.fanout.clear();
        self.fanout_dirty = true;
        for x in &mut self.v {
            x.agg = NONE;
        }
        self.aggs.clear();
        let order = self.postorder_all();
        let mut acc: HashMap<u32, Vec<(Sym, u64)>> = HashMap::new();
        for i in order {
            let mine = acc.remove(&i);
            let own = self.own_avail(i);
            if let Some(l) = &mine {
                let slot = self.aggs.len() as u32;
                self.aggs.push(l.clone());
                self.v[i as usize].agg = slot;
            }
            let p = self.v[i as usize].parent;
            if p == NONE || own == 0 {
                continue;
            }
            let e = acc.entry(p).or_default();
            let ty = self.v[i as usize].ty;
            add(e, ty, own);
            for (t, n) in mine.into_iter().flatten() {
                add(e, t, n);
            }
        }
    }
}

fn add(l: &mut Vec<(Sym, u64)>, t: Sym, n: u64) {
    match l.iter_mut().find(|e| e.0 == t) {
        Some(e) => e.1 += n,
        None => l.push((t, n)),
    }
}

fn trailing_digits(s: &str) -> Option<i64> {
    let start = s
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_digit())
        .last()
        .map(|(i, _)| i)?;
    s[start..].parse().ok()
}

fn edge_meta(m: Option<&Value>, hier: &str) -> Result<(String, String), String> {
    // An edge without a relationship (Fluxion's compact form): RFC 20
    // wants one, so the subsystem's usual one is assumed (`supplies_to`
    // for power, as Fluxion's power graphs name it; `contains` otherwise).
    let default_rel = |sub: &str| {
        if sub == "power" && sub != hier {
            "supplies_to".to_string()
        } else {
            "contains".to_string()
        }
    };
    let Some(m) = m else {
        return Ok((hier.to_string(), default_rel(hier)));
    };
    let m = match m {
        Value::Null => return Ok((hier.to_string(), default_rel(hier))),
        Value::Object(o) => o,
        _ => return Err("'metadata' must be an object".into()),
    };
    let rel = match m.get("relationship") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err("'relationship' must be a string".into()),
    };
    if let Some(s) = m.get("subsystem") {
        let s = s.as_str().ok_or("'subsystem' must be a string")?;
        return Ok((s.to_string(), rel.unwrap_or_else(|| default_rel(s))));
    }
    // 2022 form: {"name": {"containment": "contains"}}.
    if let Some(Value::Object(nm)) = m.get("name") {
        if let Some((s, r)) = nm.iter().next() {
            let r = r.as_str().unwrap_or("");
            return Ok((s.clone(), rel.unwrap_or_else(|| r.to_string())));
        }
    }
    Ok((hier.to_string(), rel.unwrap_or_else(|| default_rel(hier))))
}

type Windows = HashMap<JobId, (JobKind, u64, u64)>;

fn parse_jobs(meta: Option<&Value>) -> Result<Windows, ModelError> {
    let mut out = HashMap::new();
    let Some(jobs) = meta.and_then(|m| m.get("jobs")) else {
        return Ok(out);
    };
    let jobs = jobs
        .as_object()
        .ok_or_else(|| ModelError::Jgf("graph metadata 'jobs' must be an object".into()))?;
    for (k, v) in jobs {
        let bad = |w: &str| ModelError::Jgf(format!("graph metadata job '{k}': {w}"));
        let id: JobId = k.parse().map_err(|_| bad("invalid job id"))?;
        let kind = match v.get("kind").and_then(Value::as_str) {
            Some("allocated") => JobKind::Allocated,
            Some("reserved") => JobKind::Reserved,
            _ => return Err(bad("'kind' must be \"allocated\" or \"reserved\"")),
        };
        let start = v
            .get("start")
            .and_then(Value::as_u64)
            .ok_or_else(|| bad("'start' must be a non-negative integer"))?;
        let end = match v.get("end") {
            None | Some(Value::Null) => FOREVER,
            Some(e) => e
                .as_u64()
                .ok_or_else(|| bad("'end' must be a non-negative integer or null"))?,
        };
        out.insert(id, (kind, start, end));
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
