//! A first jobspec matcher: RFC 25 V1 shapes `node>slot>core[,gpu]` and
//! `slot>core[,gpu]`, exclusive nodes and RFC 31 constraints, over the
//! graph, using the per-type aggregates kept on inner pools to skip
//! subtrees that cannot hold a slot.
//!
//! Policy: first fit in child order (creation order, i.e. low rank and low
//! id first), node-centric: every slot fits on one `node` pool.  Without
//! a node level, slots are packed onto as few nodes as the order allows.
//! A pool is usable when it and its ancestors are up and not staged and
//! it is available now; satisfiability ignores state and allocations.

use crate::alloc::JobId;
use crate::graph::{flag, Graph, State, VertexId, NONE};
use crate::intern::Sym;
use crate::ModelError;
use idset::IdSet;
use serde_json::Value;

/// RFC 31 constraint on execution targets (`node` pools).
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// `{"properties": [...]}`: all present (`^name`: absent).
    Properties(Vec<(String, bool)>),
    /// `{"hostlist": [...]}`: the node's name is in one of the hostlists.
    Hostlist(Vec<hostlist::Hostlist>),
    /// `{"ranks": [...]}`: the node's rank is in one of the idsets.
    Ranks(Vec<IdSet>),
    And(Vec<Constraint>),
    Or(Vec<Constraint>),
    /// `{"not": [...]}`: negation of the AND of the values.
    Not(Vec<Constraint>),
}

impl Constraint {
    /// Parse an RFC 31 constraint object (`{}` matches everything).
    pub fn from_json(v: &Value) -> Result<Constraint, ModelError> {
        let bad = |s: String| ModelError::Jobspec(format!("constraint: {s}"));
        let o = v
            .as_object()
            .ok_or_else(|| bad("must be an object".into()))?;
        if o.is_empty() {
            return Ok(Constraint::And(Vec::new()));
        }
        if o.len() != 1 {
            return Err(bad("must have exactly one operator".into()));
        }
        let Some((op, args)) = o.iter().next() else {
            return Ok(Constraint::And(Vec::new()));
        };
        let args = args
            .as_array()
            .ok_or_else(|| bad(format!("value of '{op}' must be an array")))?;
        let strs = || -> Result<Vec<&str>, ModelError> {
            args.iter()
                .map(|a| {
                    a.as_str()
                        .ok_or_else(|| bad(format!("'{op}' values must be strings")))
                })
                .collect()
        };
        let subs = || -> Result<Vec<Constraint>, ModelError> {
            args.iter().map(Constraint::from_json).collect()
        };
        Ok(match op.as_str() {
            "properties" => {
                let mut out = Vec::new();
                for s in strs()? {
                    let (name, want) = match s.strip_prefix('^') {
                        Some(n) => (n, false),
                        None => (s, true),
                    };
                    if name.is_empty() || name.chars().any(|c| "!&'\"^`|()".contains(c)) {
                        return Err(bad(format!("invalid property name '{s}'")));
                    }
                    out.push((name.to_string(), want));
                }
                Constraint::Properties(out)
            }
            "hostlist" => Constraint::Hostlist(
                strs()?
                    .into_iter()
                    .map(|s| {
                        hostlist::Hostlist::decode(s)
                            .map_err(|e| bad(format!("hostlist '{s}': {e}")))
                    })
                    .collect::<Result<_, _>>()?,
            ),
            "ranks" => Constraint::Ranks(
                strs()?
                    .into_iter()
                    .map(|s| IdSet::parse(s).map_err(|e| bad(format!("ranks '{s}': {e}"))))
                    .collect::<Result<_, _>>()?,
            ),
            "and" => Constraint::And(subs()?),
            "or" => Constraint::Or(subs()?),
            "not" => Constraint::Not(subs()?),
            other => return Err(bad(format!("unknown operator '{other}'"))),
        })
    }

    fn eval(&self, g: &Graph, node: u32) -> bool {
        match self {
            Constraint::Properties(ps) => ps
                .iter()
                .all(|(n, want)| g.view(node).property(n).is_some() == *want),
            Constraint::Hostlist(hls) => {
                let name = g.name_of(node);
                hls.iter().any(|h| h.contains(&name))
            }
            Constraint::Ranks(sets) => {
                let r = g.v[node as usize].rank;
                u32::try_from(r).is_ok_and(|r| sets.iter().any(|s| s.contains(r)))
            }
            Constraint::And(v) => v.iter().all(|c| c.eval(g, node)),
            // RFC 31: an empty "or" matches everything.
            Constraint::Or(v) => v.is_empty() || v.iter().any(|c| c.eval(g, node)),
            Constraint::Not(v) => !v.iter().all(|c| c.eval(g, node)),
        }
    }
}

/// A V1 resource request.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Number of distinct nodes (0: no node level).
    pub nnodes: u32,
    /// Total slots.
    pub nslots: u32,
    /// Cores per slot.
    pub cores: u32,
    /// GPUs per slot.
    pub gpus: u32,
    /// Whole nodes (only with a node level).
    pub exclusive: bool,
    /// Duration in seconds (0: unlimited).
    pub duration: f64,
    pub constraint: Option<Constraint>,
}

impl Request {
    /// `slot>core[,gpu]` with `nslots` slots.
    pub fn slots(nslots: u32, cores: u32, gpus: u32) -> Request {
        Request {
            nnodes: 0,
            nslots,
            cores,
            gpus,
            exclusive: false,
            duration: 0.0,
            constraint: None,
        }
    }

    /// `node>slot>core[,gpu]`: `nnodes` nodes with `slots_per_node` slots.
    pub fn nodes(
        nnodes: u32,
        slots_per_node: u32,
        cores: u32,
        gpus: u32,
        exclusive: bool,
    ) -> Request {
        Request {
            nnodes,
            nslots: nnodes.saturating_mul(slots_per_node),
            cores,
            gpus,
            exclusive,
            duration: 0.0,
            constraint: None,
        }
    }

    /// Parse an RFC 25 V1 jobspec given as JSON.
    pub fn from_jobspec(js: &Value) -> Result<Request, ModelError> {
        let bad = |s: &str| ModelError::Jobspec(s.to_string());
        match js.get("version") {
            None => return Err(bad("'version' is missing")),
            Some(v) if v.as_i64() == Some(1) => {}
            Some(v) => {
                return Err(ModelError::Jobspec(format!("version must be 1, not {v}")));
            }
        }
        let res = match js.get("resources") {
            None => return Err(bad("'resources' is missing")),
            Some(Value::Array(a)) => a,
            Some(v) => {
                return Err(ModelError::Jobspec(format!(
                    "'resources' must be an array, not {}",
                    crate::jobspec::describe(v)
                )))
            }
        };
        let [top] = res.as_slice() else {
            return Err(bad("'resources' must have exactly one entry"));
        };
        let count = |r: &Value, what: &str| -> Result<u32, ModelError> {
            r.get("count")
                .and_then(Value::as_u64)
                .filter(|&c| c >= 1)
                .and_then(|c| u32::try_from(c).ok())
                .ok_or_else(|| {
                    ModelError::Jobspec(format!("{what} count must be a positive integer"))
                })
        };
        let ty = |r: &Value| {
            r.get("type")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let with = |r: &Value| -> Vec<Value> {
            r.get("with")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        };
        let (nnodes, exclusive, slot) = match ty(top).as_str() {
            "node" => {
                let n = count(top, "node")?;
                let x = match top.get("exclusive") {
                    None => false,
                    Some(v) => v
                        .as_bool()
                        .ok_or_else(|| bad("node 'exclusive' must be a boolean"))?,
                };
                let w = with(top);
                let [s] = w.as_slice() else {
                    return Err(bad("node must contain exactly one slot"));
                };
                (n, x, s.clone())
            }
            "slot" => (0, false, top.clone()),
            t => {
                return Err(ModelError::Jobspec(format!(
                    "unsupported resource type '{t}' at the top level"
                )))
            }
        };
        if ty(&slot) != "slot" {
            return Err(bad("expected a slot"));
        }
        if slot.get("exclusive").is_some() {
            return Err(bad("only node may carry 'exclusive'"));
        }
        let per = count(&slot, "slot")?;
        let (mut cores, mut gpus) = (0, 0);
        for c in with(&slot) {
            match ty(&c).as_str() {
                "core" if cores == 0 => cores = count(&c, "core")?,
                "gpu" if gpus == 0 => gpus = count(&c, "gpu")?,
                t => {
                    return Err(ModelError::Jobspec(format!(
                        "unsupported or repeated resource '{t}' in a slot"
                    )))
                }
            }
        }
        if cores == 0 {
            return Err(bad("a slot must contain cores"));
        }
        let system = js.get("attributes").and_then(|a| a.get("system"));
        let duration = system
            .and_then(|s| s.get("duration"))
            .and_then(Value::as_f64)
            .ok_or_else(|| bad("attributes.system.duration is required"))?;
        if duration < 0.0 {
            return Err(bad("duration must not be negative"));
        }
        let constraint = match system.and_then(|s| s.get("constraints")) {
            None => None,
            Some(c) => Some(Constraint::from_json(c)?),
        };
        let nslots = if nnodes > 0 {
            nnodes.saturating_mul(per)
        } else {
            per
        };
        Ok(Request {
            nnodes,
            nslots,
            cores,
            gpus,
            exclusive,
            duration,
            constraint,
        })
    }
}

/// The outcome of a match: chosen nodes and the units taken from each
/// chosen core / gpu pool (or the whole node when exclusive).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Match {
    pub nodes: Vec<VertexId>,
    /// (pool, units) of the cores and gpus taken; empty for exclusive nodes.
    pub units: Vec<(VertexId, u64)>,
    pub exclusive: bool,
}

struct Types {
    node: Sym,
    core: Option<Sym>,
    gpu: Option<Sym>,
}

impl Graph {
    fn types(&self) -> Option<Types> {
        Some(Types {
            node: self.syms.get("node")?,
            core: self.syms.get("core"),
            gpu: self.syms.get("gpu"),
        })
    }

    fn unusable(&self, i: u32, ignore_state: bool) -> bool {
        if ignore_state {
            return false;
        }
        let x = &self.v[i as usize];
        x.state != State::Up || x.flags & flag::STAGED != 0 || self.open_free(i) == 0
    }

    /// Units of `ty` free below node `i` (all of them when `ignore`).
    fn free_below(&self, i: u32, ty: Option<Sym>, ignore: bool) -> u64 {
        let Some(ty) = ty else { return 0 };
        if !ignore {
            if !self.reserved_below(i) {
                return self.avail_below_raw(i, ty);
            }
            // Reservations below: count exactly what an open-ended
            // allocation could take.
            let mut tmp = Vec::new();
            self.take_units(i, Some(ty), u64::MAX, &mut tmp);
            return tmp.iter().map(|u| u.1).sum();
        }
        let mut n = 0;
        self.preorder_from(i, &mut |d| {
            if d != i && self.v[d as usize].ty == ty {
                n += self.v[d as usize].size;
            }
        });
        n
    }

    /// How many slots node `i` can hold now (or ever, with `ignore`).
    fn node_slots(&self, i: u32, req: &Request, t: &Types, ignore: bool) -> u64 {
        let cores = self.free_below(i, t.core, ignore) / u64::from(req.cores.max(1));
        if req.gpus == 0 {
            return cores;
        }
        cores.min(self.free_below(i, t.gpu, ignore) / u64::from(req.gpus))
    }

    fn node_wholly_free(&self, i: u32) -> bool {
        // No records on the node or below it, and nothing taken.
        self.v[i as usize].rec == NONE
    }

    /// Visit one pool while picking nodes; returns whether to descend.
    #[allow(clippy::too_many_arguments)]
    fn visit_for_pick(
        &self,
        i: u32,
        req: &Request,
        t: &Types,
        ignore: bool,
        per_node: u64,
        min_cores: u64,
        need_nodes: &mut u64,
        need_slots: &mut u64,
        out: &mut Vec<(u32, u64)>,
    ) -> bool {
        let x = &self.v[i as usize];
        if x.flags & flag::NO_CONTAINMENT != 0 || self.unusable(i, ignore) {
            return false;
        }
        if x.ty == t.node {
            if let Some(c) = &req.constraint {
                if !c.eval(self, i) {
                    return false;
                }
            }
            if req.exclusive && !ignore && !self.node_wholly_free(i) {
                return false;
            }
            let slots = self.node_slots(i, req, t, ignore);
            if req.nnodes > 0 {
                if slots >= per_node {
                    out.push((i, per_node));
                    *need_nodes -= 1;
                }
            } else if slots > 0 {
                let take = slots.min(*need_slots);
                out.push((i, take));
                *need_slots -= take;
            }
            return false;
        }
        // Prune subtrees that cannot hold one node's share.
        ignore
            || !t
                .core
                .is_some_and(|c| x.first != NONE && self.avail_below_raw(i, c) < min_cores)
    }

    /// Find node pools able to satisfy `req`, first fit.  Returns (node,
    /// slots to place on it).
    fn pick_nodes(&self, req: &Request, ignore: bool) -> Option<Vec<(u32, u64)>> {
        let t = self.types()?;
        let per_node = if req.nnodes > 0 {
            u64::from(req.nslots / req.nnodes.max(1))
        } else {
            1
        };
        let mut need_nodes = u64::from(req.nnodes);
        let mut need_slots = u64::from(req.nslots);
        let mut out = Vec::new();
        let min_cores = u64::from(req.cores) * per_node.max(1);
        let mut need = Vec::new();
        if let Some(c) = t.core {
            need.push((c, min_cores));
        }
        if let Some(gp) = t.gpu {
            if req.gpus > 0 {
                need.push((gp, u64::from(req.gpus) * per_node.max(1)));
            }
        }
        for &root in &self.roots {
            // Depth-first walk using sibling links (no per-level buffers,
            // so a wide level costs nothing until it is reached).
            let mut i = root;
            loop {
                let descend = self.visit_for_pick(
                    i,
                    req,
                    &t,
                    ignore,
                    per_node,
                    min_cores,
                    &mut need_nodes,
                    &mut need_slots,
                    &mut out,
                );
                if need_nodes == 0 && req.nnodes > 0 || need_slots == 0 && req.nnodes == 0 {
                    return Some(out);
                }
                if descend {
                    let first = match self.fanout_next(i, 0, &need) {
                        Some(c) if !ignore => c,
                        _ => self.v[i as usize].first,
                    };
                    if first != NONE {
                        i = first;
                        continue;
                    }
                }
                // Next sibling, climbing up as needed; stop at the root.
                loop {
                    if i == root {
                        break;
                    }
                    let p = self.v[i as usize].parent;
                    let nx = match self.fanout_pos(p, i) {
                        Some(pos) if !ignore => self.fanout_next(p, pos + 1, &need).unwrap_or(NONE),
                        _ => self.v[i as usize].next,
                    };
                    if nx != NONE {
                        i = nx;
                        break;
                    }
                    i = p;
                }
                if i == root {
                    break;
                }
            }
        }
        None
    }

    /// Take `n` units of type `ty` below node `i` (first fit).
    fn take_units(&self, i: u32, ty: Option<Sym>, mut n: u64, out: &mut Vec<(VertexId, u64)>) {
        let Some(ty) = ty else { return };
        if n == 0 {
            return;
        }
        let mut stack = vec![i];
        while let Some(d) = stack.pop() {
            let x = &self.v[d as usize];
            if d != i {
                if x.state != State::Up || x.flags & flag::STAGED != 0 {
                    continue;
                }
                let a = self.open_free(d);
                if a == 0 {
                    continue;
                }
                if x.ty == ty {
                    let k = a.min(n);
                    out.push((VertexId(d), k));
                    n -= k;
                    if n == 0 {
                        return;
                    }
                    continue;
                }
                if x.first != NONE && self.avail_below_raw(d, ty) == 0 {
                    continue;
                }
            }
            let mut c = x.last;
            while c != NONE {
                stack.push(c);
                c = self.v[c as usize].prev;
            }
        }
    }

    /// Find resources for `req` now, without allocating.
    pub fn match_request(&self, req: &Request) -> Option<Match> {
        if req.nslots == 0 || req.cores == 0 {
            return None;
        }
        let t = self.types()?;
        let nodes = self.pick_nodes(req, false)?;
        let mut m = Match {
            nodes: nodes.iter().map(|&(n, _)| VertexId(n)).collect(),
            units: Vec::new(),
            exclusive: req.exclusive && req.nnodes > 0,
        };
        if !m.exclusive {
            for &(n, slots) in &nodes {
                self.take_units(n, t.core, slots * u64::from(req.cores), &mut m.units);
                self.take_units(n, t.gpu, slots * u64::from(req.gpus), &mut m.units);
            }
        }
        Some(m)
    }

    /// Could `req` ever be satisfied (ignoring state and allocations)?
    pub fn satisfiable(&self, req: &Request) -> bool {
        req.nslots > 0 && req.cores > 0 && self.pick_nodes(req, true).is_some()
    }

    /// Match `req` and allocate it to `job`.  `Ok(None)` when nothing fits
    /// now.
    pub fn match_allocate(
        &mut self,
        req: &Request,
        job: JobId,
    ) -> Result<Option<Match>, ModelError> {
        if self.jobs.contains_key(&job) {
            return Err(ModelError::Job {
                job,
                reason: "already holds resources".into(),
            });
        }
        self.ensure_fanout();
        let Some(m) = self.match_request(req) else {
            return Ok(None);
        };
        let result = if m.exclusive {
            m.nodes.iter().try_for_each(|&n| {
                let size = self.v[n.index()].size;
                self.allocate(n, size, job)
            })
        } else {
            m.units
                .iter()
                .try_for_each(|&(v, k)| self.allocate(v, k, job))
        };
        if let Err(e) = result {
            // Roll back what was taken.
            let _ = self.free_job(job);
            return Err(e);
        }
        Ok(Some(m))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// 4 nodes x 2 sockets x 4 cores, 2 gpus per node (under the node).
    fn g() -> Graph {
        let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-7","gpu":"0-1"}}],
            "nodelist":["n[0-3]"],"properties":{"ssd":"0-1"}}}"#;
        Graph::from_r_str(r, true).unwrap()
    }

    fn spec(top: Value) -> Value {
        json!({"version":1,"resources":[top],"tasks":[{"command":["x"],"slot":"task","count":{"per_slot":1}}],
               "attributes":{"system":{"duration":0}}})
    }

    #[test]
    fn parses_v1_shapes() {
        let s = spec(json!({"type":"node","count":2,"exclusive":true,"with":[
            {"type":"slot","count":3,"label":"task","with":[{"type":"core","count":2},{"type":"gpu","count":1}]}]}));
        assert_eq!(
            Request::from_jobspec(&s).unwrap(),
            Request::nodes(2, 3, 2, 1, true)
        );
        let s = spec(
            json!({"type":"slot","count":5,"label":"task","with":[{"type":"core","count":4}]}),
        );
        assert_eq!(Request::from_jobspec(&s).unwrap(), Request::slots(5, 4, 0));
        let e = |v: Value| Request::from_jobspec(&v).unwrap_err().to_string();
        assert_eq!(
            e(spec(json!({"type":"core","count":1}))),
            "jobspec: unsupported resource type 'core' at the top level"
        );
        assert_eq!(
            e(spec(
                json!({"type":"slot","count":0,"with":[{"type":"core","count":1}]})
            )),
            "jobspec: slot count must be a positive integer"
        );
        assert_eq!(
            e(spec(
                json!({"type":"slot","count":1,"with":[{"type":"memory","count":1}]})
            )),
            "jobspec: unsupported or repeated resource 'memory' in a slot"
        );
        assert_eq!(e(json!({"version":2})), "jobspec: version must be 1, not 2");
    }

    #[test]
    fn slot_core_packs_onto_nodes_first_fit() {
        let mut g = g();
        let m = g
            .match_allocate(&Request::slots(1, 8, 0), 1)
            .unwrap()
            .unwrap();
        assert_eq!(m.nodes.len(), 1);
        assert_eq!(m.units.len(), 8);
        let names: Vec<String> = m.units.iter().map(|u| g.path(u.0).unwrap()).collect();
        assert_eq!(names[0], "/cluster0/n0/core0");
        assert_eq!(names[7], "/cluster0/n0/core7");
        // Next 3 slots of 3 cores: n0 is full, n1 takes two, n2 one.
        let m = g
            .match_allocate(&Request::slots(3, 3, 0), 2)
            .unwrap()
            .unwrap();
        let nodes: Vec<String> = m.nodes.iter().map(|&n| g.path(n).unwrap()).collect();
        assert_eq!(nodes, ["/cluster0/n1", "/cluster0/n2"]);
        g.check_invariants().unwrap();
        g.free_job(1).unwrap();
        g.free_job(2).unwrap();
        assert_eq!(g.aggregate_all()["core"], 32);
    }

    #[test]
    fn exclusive_nodes_and_constraints() {
        let mut g = g();
        let c = g.lookup("/cluster0/n0/core3").unwrap();
        g.allocate(c, 1, 9).unwrap();
        let req = Request::nodes(2, 1, 1, 0, true);
        let m = g.match_allocate(&req, 10).unwrap().unwrap();
        let nodes: Vec<String> = m.nodes.iter().map(|&n| g.path(n).unwrap()).collect();
        assert_eq!(nodes, ["/cluster0/n1", "/cluster0/n2"]);
        assert_eq!(g.exclusive(m.nodes[0]).unwrap(), Some(10));
        // Only n3 is wholly free now.
        assert!(g.match_request(&req).is_none());
        assert!(g.satisfiable(&req));
        let mut req = Request::nodes(1, 1, 1, 0, false);
        req.constraint = Some(Constraint::from_json(&json!({"properties":["ssd"]})).unwrap());
        let m = g.match_request(&req).unwrap();
        assert_eq!(g.path(m.nodes[0]).unwrap(), "/cluster0/n0");
        req.constraint = Some(
            Constraint::from_json(
                &json!({"and":[{"properties":["^ssd"]},{"hostlist":["n[2-3]"]}]}),
            )
            .unwrap(),
        );
        let m = g.match_request(&req).unwrap();
        assert_eq!(g.path(m.nodes[0]).unwrap(), "/cluster0/n3");
        req.constraint = Some(Constraint::from_json(&json!({"not":[]})).unwrap());
        assert!(g.match_request(&req).is_none());
        assert!(!g.satisfiable(&req));
        req.constraint = Some(Constraint::from_json(&json!({"ranks":["1"]})).unwrap());
        assert!(g.match_request(&req).is_none());
        assert!(g.satisfiable(&req));
        g.check_invariants().unwrap();
    }

    #[test]
    fn gpus_and_unsatisfiable() {
        let mut g = g();
        let req = Request::slots(2, 2, 1);
        let m = g.match_allocate(&req, 1).unwrap().unwrap();
        assert_eq!(m.units.len(), 6);
        assert!(!g.satisfiable(&Request::slots(1, 9, 0)));
        assert!(!g.satisfiable(&Request::slots(1, 1, 3)));
        assert!(g.satisfiable(&Request::slots(8, 2, 1)));
        assert!(g.match_request(&Request::slots(8, 2, 1)).is_none());
        assert!(matches!(
            g.match_allocate(&req, 1),
            Err(ModelError::Job { .. })
        ));
        // Down nodes are skipped now but count for satisfiability.
        for n in ["n0", "n1", "n2", "n3"] {
            let v = g.lookup(&format!("/cluster0/{n}")).unwrap();
            g.set_state(v, State::Down).unwrap();
        }
        assert!(g.match_request(&Request::slots(1, 1, 0)).is_none());
        assert!(g.satisfiable(&Request::slots(1, 1, 0)));
    }

    #[test]
    fn constraint_parse_errors() {
        let e = |v: Value| Constraint::from_json(&v).unwrap_err().to_string();
        assert_eq!(
            e(json!({"a":[],"b":[]})),
            "jobspec: constraint: must have exactly one operator"
        );
        assert_eq!(
            e(json!({"properties":["a|b"]})),
            "jobspec: constraint: invalid property name 'a|b'"
        );
        assert_eq!(
            e(json!({"foo":[]})),
            "jobspec: constraint: unknown operator 'foo'"
        );
        assert_eq!(
            e(json!({"ranks":"1"})),
            "jobspec: constraint: value of 'ranks' must be an array"
        );
    }
}
