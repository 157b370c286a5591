//! Conversions between RFC 20 R and the resource graph.
//!
//! R → graph follows Fluxion's `rv1exec` reader: a `cluster0` root (type
//! `cluster`, id 0, no rank), one `node` per execution target in rank
//! order, named after its host (basename = the hostname without its
//! trailing digits, id = those digits, as Fluxion splits it), carrying the
//! target's properties (value ""), and one pool per child id (`core`,
//! `gpu` or any other child name; type and basename = the child name, id
//! = the child id, size 1, rank = the target's).  Without a nodelist the
//! node is `node<rank>`.  When R carries a `scheduling` JGF it is used
//! instead (unless told otherwise), as Fluxion does.
//!
//! Graph → R collects, for every `node` pool with a rank, the ids of the
//! `core` and `gpu` leaf pools below it (RFC 20 names no other children;
//! memory and the like stay in the graph), its name as hostname and its properties
//! (`name=value` when the value is not empty, as Fluxion's R writer does),
//! and lets the `rset` crate encode it the way flux-core does.

use crate::alloc::JobId;
use crate::graph::{Graph, Pool, NONE};
use crate::ModelError;
use idset::IdSet;
use rset::Rset;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// RFC 20's sentence on which keys make an R.
const R_VALID: &str = "It SHALL be valid if and only if it contains the version key and either or both the execution and scheduling keys.";

/// Fluxion's hostname split: (basename, id).  No trailing digits gives id
/// -1; an all-digit name keeps the whole name as basename.
pub fn split_hostname(h: &str) -> Result<(&str, i64), ModelError> {
    let digits = h.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return Ok((h, -1));
    }
    let cut = h.len() - digits;
    let suffix = h.get(cut..).unwrap_or("");
    let id = suffix
        .trim_start_matches('0')
        .parse::<i64>()
        .or_else(|e| {
            if suffix.bytes().all(|b| b == b'0') {
                Ok(0)
            } else {
                Err(e)
            }
        })
        .map_err(|_| ModelError::R(format!("hostname '{h}': numeric suffix out of range")))?;
    let base = if cut == 0 {
        h
    } else {
        h.get(..cut).unwrap_or(h)
    };
    Ok((base, id))
}

impl Graph {
    /// Build the graph of an R (rv1exec rules; `scheduling` ignored).
    pub fn from_rset(r: &Rset) -> Result<Graph, ModelError> {
        let infos = r.node_infos();
        let total: u64 = infos
            .iter()
            .map(|n| 1 + n.children.iter().map(|(_, s)| s.len()).sum::<u64>())
            .sum();
        let cap = usize::try_from(total.saturating_add(1)).unwrap_or(usize::MAX);
        if cap >= NONE as usize {
            return Err(ModelError::R(format!(
                "{total} resources do not fit in a graph"
            )));
        }
        let mut g = Graph::with_capacity(cap);
        let cluster = g.intern("cluster");
        let root = g.add_root(Pool::new(cluster).id(0));
        let node_ty = g.intern("node");
        let mut child_syms: BTreeMap<String, crate::Sym> = BTreeMap::new();
        for info in &infos {
            let rank = i64::from(info.rank);
            let mut p = Pool::new(node_ty).rank(rank);
            match &info.hostname {
                Some(h) => {
                    let (base, id) = split_hostname(h)?;
                    let b = g.intern(base);
                    p = p.basename(b).id(id).name(h.as_str());
                }
                None => p = p.id(rank),
            }
            let node = g.add_child(root, p)?;
            for prop in &info.properties {
                g.set_property(node, prop, "")?;
            }
            for (name, ids) in &info.children {
                let ty = match child_syms.get(name) {
                    Some(&s) => s,
                    None => {
                        let s = g.intern(name);
                        child_syms.insert(name.clone(), s);
                        s
                    }
                };
                for id in ids.iter() {
                    g.add_child(node, Pool::new(ty).id(i64::from(id)).rank(rank))?;
                }
            }
        }
        Ok(g)
    }

    /// Build the graph of an R given as JSON text.  With `use_scheduling`,
    /// a `scheduling` key holding a JGF graph is loaded instead of
    /// `execution` (Fluxion's behaviour unless forced to rv1exec).
    pub fn from_r_str(s: &str, use_scheduling: bool) -> Result<Graph, ModelError> {
        let v = rset::json::loads(s.as_bytes()).map_err(|e| ModelError::R(e.text))?;
        Graph::from_r_value(&v, use_scheduling)
    }

    /// [`Graph::from_r_str`] for an R already parsed as JSON (e.g. the
    /// `resources` of a `resource.acquire` response).  RFC 20: an R "SHALL
    /// be valid if and only if it contains the version key and either or
    /// both the execution and scheduling keys", so with `use_scheduling`
    /// an R of `version` and `scheduling` alone loads; an `execution`
    /// beside a `scheduling` is still checked, and the graph's execution
    /// targets whose rank it does not list (excluded by the service, which
    /// keeps the whole JGF) are down: never allocatable.
    pub fn from_r_value(v: &Value, use_scheduling: bool) -> Result<Graph, ModelError> {
        let r_err = |e: rset::RError| ModelError::R(e.to_string());
        let jgf = v
            .get("scheduling")
            .filter(|s| use_scheduling && s.get("graph").is_some());
        let Some(jgf) = jgf else {
            if use_scheduling && v.is_object() && v.get("execution").is_none() {
                return Err(ModelError::R(format!(
                    "no execution and no scheduling graph: RFC 20: \"{R_VALID}\""
                )));
            }
            return Graph::from_rset(&Rset::from_json(v).map_err(r_err)?);
        };
        if v.get("execution").is_some() {
            let r = Rset::from_json(v).map_err(r_err)?;
            let mut g = Graph::from_jgf(jgf)?;
            g.down_outside(&r.ranks())?;
            return Ok(g);
        } else {
            match v.get("version") {
                Some(n) if n.as_i64() == Some(1) => {}
                Some(n) => return Err(ModelError::R(format!("invalid version={n}"))),
                None => return Err(ModelError::R("Object item not found: version".into())),
            }
        }
        Graph::from_jgf(jgf)
    }

    /// Set down every execution target (see [`Graph::target_roots`]) whose
    /// rank is not in `ranks`.
    pub fn down_outside(&mut self, ranks: &IdSet) -> Result<(), ModelError> {
        for (rank, v) in self.target_roots() {
            if u32::try_from(rank).map_or(true, |r| !ranks.contains(r)) {
                self.set_state(v, crate::State::Down)?;
            }
        }
        Ok(())
    }

    /// The pool standing for each execution target: the highest pool of
    /// each rank (a pool with a rank whose parent has another rank or
    /// none), i.e. the `node` pools of an R.
    pub fn target_roots(&self) -> BTreeMap<i64, crate::VertexId> {
        let mut out = BTreeMap::new();
        for v in self.vertices() {
            let x = &self.v[v.index()];
            if x.rank < 0 {
                continue;
            }
            let p = x.parent;
            if p == NONE || self.v[p as usize].rank != x.rank {
                out.entry(x.rank).or_insert(v);
            }
        }
        out
    }

    /// Jobs with records on `v` or below it: (allocated, reserved).
    pub fn holders(&self, v: crate::VertexId) -> Result<(Vec<JobId>, Vec<JobId>), ModelError> {
        let mut al: Vec<JobId> = self.allocations(v)?.into_iter().map(|e| e.0).collect();
        al.extend(self.shared(v)?);
        let mut rs: Vec<JobId> = self.reservations(v)?.into_iter().map(|e| e.0).collect();
        rs.extend(self.reserved_shared(v)?);
        al.sort_unstable();
        al.dedup();
        rs.sort_unstable();
        rs.dedup();
        Ok((al, rs))
    }

    /// Carry the jobs of `old` over to this graph, pool by pool (matched
    /// by containment path), whatever the pools' states: used when a
    /// scheduler rebuilds its graph from a new resource set and keeps its
    /// running jobs.  Returns the jobs that could not be carried whole
    /// (a pool vanished or is smaller); their partial records are freed.
    pub fn adopt_jobs(&mut self, old: &Graph) -> Vec<JobId> {
        let mut lost = Vec::new();
        for j in old.jobs() {
            let mut ok = true;
            for &v in &j.vertices {
                let ((al, rs), _) = old.job_amounts(v.0, j.id);
                let n = if j.kind == crate::JobKind::Allocated {
                    al
                } else {
                    rs
                };
                let here = old.path(v).and_then(|p| self.lookup(&p));
                let done = here.is_some_and(|nv| {
                    self.record(nv, n, j.id, j.kind, (j.start, j.end), true)
                        .is_ok()
                });
                if !done {
                    ok = false;
                    break;
                }
            }
            if !ok {
                let _ = self.free_job(j.id);
                lost.push(j.id);
            }
        }
        lost
    }

    /// R (as flux-core encodes it) of the whole graph, or of the pools held
    /// by `job`.  Instance-local properties (`+name`) are left out of a
    /// job's R, as RFC 31 asks.
    pub fn to_r(&self, job: Option<JobId>) -> Result<Value, ModelError> {
        let owned;
        let g = match job {
            Some(j) => {
                owned = self.job_graph(j)?;
                &owned
            }
            None => self,
        };
        let node_ty = g.syms.get("node");
        let mut rlite = Vec::new();
        let mut hosts: BTreeMap<i64, String> = BTreeMap::new();
        let mut props: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for v in g.vertices() {
            let x = &g.v[v.index()];
            if Some(x.ty) != node_ty || x.rank < 0 {
                continue;
            }
            let rank = u32::try_from(x.rank).map_err(|_| {
                ModelError::R(format!("{}: rank {} out of range", g.path_of(v.0), x.rank))
            })?;
            let mut children: BTreeMap<String, Vec<u32>> = BTreeMap::new();
            g.preorder_from(v.0, &mut |d| {
                let dx = &g.v[d as usize];
                if d == v.0 || dx.first != NONE {
                    return;
                }
                // RFC 20: children hold `core` and `gpu` (other keys are
                // reserved), as Fluxion's R writer keeps them.
                let ty = g.syms.resolve(dx.ty);
                if !matches!(ty, "core" | "gpu") {
                    return;
                }
                if let Ok(id) = u32::try_from(dx.id) {
                    children.entry(ty.to_string()).or_default().push(id);
                }
            });
            let mut cm = Map::new();
            for (t, mut ids) in children {
                ids.sort_unstable();
                ids.dedup();
                let set: IdSet = ids.into_iter().collect();
                cm.insert(t, Value::String(set.encode()));
            }
            if !cm.contains_key("core") {
                cm.insert("core".into(), Value::String(String::new()));
            }
            rlite.push(json!({"rank": rank.to_string(), "children": cm}));
            if hosts.insert(x.rank, g.name_of(v.0).into_owned()).is_some() {
                return Err(ModelError::R(format!("rank {rank} appears on two nodes")));
            }
            for (k, val) in g.view(v.0).properties() {
                if job.is_some() && k.starts_with('+') {
                    continue;
                }
                let name = if val.is_empty() {
                    k.to_string()
                } else {
                    format!("{k}={val}")
                };
                props.entry(name).or_default().push(rank);
            }
        }
        let mut exec = Map::new();
        exec.insert("R_lite".into(), Value::Array(rlite));
        exec.insert(
            "nodelist".into(),
            Value::Array(hosts.into_values().map(Value::String).collect()),
        );
        if !props.is_empty() {
            let mut pm = Map::new();
            for (k, mut ranks) in props {
                ranks.sort_unstable();
                let set: IdSet = ranks.into_iter().collect();
                pm.insert(k, Value::String(set.encode()));
            }
            exec.insert("properties".into(), Value::Object(pm));
        }
        let r = Rset::from_json(&json!({"version": 1, "execution": exec}))
            .map_err(|e| ModelError::R(e.to_string()))?;
        Ok(r.to_json())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jgf::JgfStyle;

    const EXAMPLE1: &str = r#"{"version":1,"execution":{"R_lite":[{"rank":"19-22","children":{"core":"0-47","gpu":"0-7"}}],"nodelist":["node[186-189]"],"nslots":32,"starttime":1676560542,"expiration":1676562342}}"#;

    #[test]
    fn split_hostname_like_fluxion() {
        assert_eq!(split_hostname("node186").unwrap(), ("node", 186));
        assert_eq!(split_hostname("node00001").unwrap(), ("node", 1));
        assert_eq!(split_hostname("node000").unwrap(), ("node", 0));
        assert_eq!(split_hostname("login").unwrap(), ("login", -1));
        assert_eq!(split_hostname("1234").unwrap(), ("1234", 1234));
        assert_eq!(split_hostname("a1b2").unwrap(), ("a1b", 2));
        assert!(split_hostname("n99999999999999999999").is_err());
    }

    #[test]
    fn rfc20_example1() {
        let g = Graph::from_r_str(EXAMPLE1, true).unwrap();
        assert_eq!(g.len(), 1 + 4 * (1 + 48 + 8));
        g.check_invariants().unwrap();
        let agg: Vec<(String, u64)> = g.aggregate_all().into_iter().collect();
        assert_eq!(
            agg,
            vec![
                ("cluster".into(), 1),
                ("core".into(), 192),
                ("gpu".into(), 32),
                ("node".into(), 4)
            ]
        );
        let n = g.lookup("/cluster0/node186").unwrap();
        let p = g.get(n).unwrap();
        assert_eq!(
            (p.rank(), p.id(), p.basename()),
            (Some(19), Some(186), "node")
        );
        assert!(!p.has_custom_name());
        let c = g
            .get(g.lookup("/cluster0/node189/core47").unwrap())
            .unwrap();
        assert_eq!((c.rank(), c.id(), c.size()), (Some(22), Some(47), 1));
        assert!(g.lookup("/cluster0/node189/gpu7").is_some());
        // Rank order and uniq ids in creation order.
        assert_eq!(g.get(g.root().unwrap()).unwrap().uniq_id(), 0);
        assert_eq!(p.uniq_id(), 1);
    }

    #[test]
    fn properties_and_padded_hostnames() {
        let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"0-3","children":{"core":"0-1"}}],
            "nodelist":["node[0001-0004]"],"properties":{"amd-mi50@gpu":"1-2","debug":"0"}}}"#;
        let g = Graph::from_r_str(r, true).unwrap();
        let n = g.get(g.lookup("/cluster0/node0002").unwrap()).unwrap();
        assert_eq!((n.id(), n.name().as_ref()), (Some(2), "node0002"));
        assert_eq!(n.property("amd-mi50@gpu"), Some(""));
        assert_eq!(n.property("debug"), None);
        let found = g.find_matches(&crate::Pred::parse("property=debug").unwrap());
        assert_eq!(found.len(), 1);
        // Back to R: the same document, as flux-core encodes it.
        let back = g.to_r(None).unwrap();
        let want = Rset::from_json_str(r).unwrap().to_json();
        assert_eq!(back, want);
    }

    #[test]
    fn missing_nodelist_names_nodes_by_rank() {
        let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"5","children":{"core":"0"}}]}}"#;
        let g = Graph::from_r_str(r, true).unwrap();
        assert!(g.lookup("/cluster0/node5/core0").is_some());
    }

    #[test]
    fn invalid_r_is_reported() {
        let e = Graph::from_r_str(r#"{"version":2}"#, true).unwrap_err();
        assert!(matches!(e, ModelError::R(_)), "{e}");
    }

    /// A rank the scheduling JGF has and R_lite does not (excluded) is
    /// down: not allocatable (issue 26, item 7).
    #[test]
    fn ranks_outside_r_lite_are_down_in_a_scheduling_graph() {
        let full = Graph::from_r_str(EXAMPLE1, true).unwrap();
        let all = full.target_roots();
        assert!(all.len() >= 2);
        let (&kept, _) = all.iter().next().unwrap();
        let mut r: Value = serde_json::from_str(EXAMPLE1).unwrap();
        r["scheduling"] = full.to_jgf(JgfStyle::Scheduling);
        let host = full.name_of(all[&kept].0).into_owned();
        r["execution"]["R_lite"][0]["rank"] = json!(kept.to_string());
        r["execution"]["R_lite"].as_array_mut().unwrap().truncate(1);
        r["execution"]["nodelist"] = json!([host]);
        let g = Graph::from_r_value(&r, true).unwrap();
        for (rank, v) in g.target_roots() {
            let want = if rank == kept {
                crate::State::Up
            } else {
                crate::State::Down
            };
            assert_eq!(g.get(v).unwrap().state(), want, "rank {rank}");
        }
        assert_eq!(g.aggregate_all().get("node"), Some(&1));
    }

    /// R_lite children are only `core` and `gpu` (issue 26, item 7).
    #[test]
    fn r_children_are_core_and_gpu_only() {
        let jgf = r#"{"graph":{"nodes":[
          {"id":"0","metadata":{"type":"cluster","id":0,"paths":{"containment":"/cluster0"}}},
          {"id":"1","metadata":{"type":"node","basename":"n","id":3,"rank":0,"paths":{"containment":"/cluster0/n3"}}},
          {"id":"2","metadata":{"type":"core","id":5,"rank":0,"paths":{"containment":"/cluster0/n3/core5"}}},
          {"id":"3","metadata":{"type":"gpu","id":1,"rank":0,"paths":{"containment":"/cluster0/n3/gpu1"}}},
          {"id":"4","metadata":{"type":"memory","id":0,"rank":0,"size":16,"paths":{"containment":"/cluster0/n3/memory0"}}},
          {"id":"5","metadata":{"type":"ssd","id":2,"rank":0,"paths":{"containment":"/cluster0/n3/ssd2"}}}
        ],"edges":[{"source":"0","target":"1"},{"source":"1","target":"2"},{"source":"1","target":"3"},
                   {"source":"1","target":"4"},{"source":"1","target":"5"}]}}"#;
        let g = Graph::from_jgf_str(jgf).unwrap();
        let r = g.to_r(None).unwrap();
        assert_eq!(
            r["execution"]["R_lite"],
            json!([{"rank": "0", "children": {"core": "5", "gpu": "1"}}])
        );
    }

    /// RFC 20: version and scheduling alone make a valid R (issue 26, 1).
    #[test]
    fn scheduling_alone_is_a_valid_r() {
        let g = Graph::from_r_str(EXAMPLE1, true).unwrap();
        let jgf = g.to_jgf(JgfStyle::Scheduling);
        let only = json!({"version": 1, "scheduling": jgf}).to_string();
        let h = Graph::from_r_str(&only, true).unwrap();
        assert_eq!(
            h.to_jgf_string(JgfStyle::Scheduling),
            g.to_jgf_string(JgfStyle::Scheduling)
        );
        // rv1exec needs execution (flux's text names the key)
        let e = Graph::from_r_str(&only, false).unwrap_err().to_string();
        assert_eq!(e, "R: Object item not found: execution");
        // neither key: the rule is named
        let e = Graph::from_r_str(r#"{"version":1}"#, true)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no execution and no scheduling graph") && e.contains("RFC 20"),
            "{e}"
        );
        let e = Graph::from_r_str(
            &json!({"version": 2, "scheduling": {"graph": {}}}).to_string(),
            true,
        )
        .unwrap_err()
        .to_string();
        assert_eq!(e, "R: invalid version=2");
        // a bad execution beside a scheduling graph is still refused
        let bad = json!({"version": 1, "scheduling": g.to_jgf(JgfStyle::Scheduling),
                         "execution": {"R_lite": {}}});
        let e = Graph::from_r_value(&bad, true).unwrap_err().to_string();
        assert!(e.contains("execution.R_lite"), "{e}");
    }

    #[test]
    fn scheduling_key_is_used_when_present() {
        let g = Graph::from_r_str(EXAMPLE1, true).unwrap();
        let jgf = g.to_jgf(JgfStyle::Scheduling);
        let mut r: Value = serde_json::from_str(EXAMPLE1).unwrap();
        // Tag one vertex so we can tell which source was used.
        let mut jgf2 = jgf.clone();
        jgf2["graph"]["nodes"][1]["metadata"]["properties"] = json!({"from-jgf": ""});
        r["scheduling"] = jgf2;
        let s = r.to_string();
        let a = Graph::from_r_str(&s, true).unwrap();
        let n = a.get(a.lookup("/cluster0/node186").unwrap()).unwrap();
        assert_eq!(n.property("from-jgf"), Some(""));
        let b = Graph::from_r_str(&s, false).unwrap();
        let n = b.get(b.lookup("/cluster0/node186").unwrap()).unwrap();
        assert_eq!(n.property("from-jgf"), None);
        assert_eq!(
            b.to_jgf_string(JgfStyle::Scheduling),
            g.to_jgf_string(JgfStyle::Scheduling)
        );
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn job_r_holds_only_the_jobs_pools() {
        let mut g = Graph::from_r_str(EXAMPLE1, true).unwrap();
        let n = g.lookup("/cluster0/node187").unwrap();
        g.allocate(n, 1, 11).unwrap();
        for c in [3, 4, 5] {
            let v = g.lookup(&format!("/cluster0/node189/core{c}")).unwrap();
            g.allocate(v, 1, 11).unwrap();
        }
        let v = g.lookup("/cluster0/node189/gpu1").unwrap();
        g.allocate(v, 1, 11).unwrap();
        let r = g.to_r(Some(11)).unwrap();
        let want = Rset::from_json_str(
            r#"{"version":1,"execution":{"R_lite":[{"rank":"20","children":{"core":"0-47","gpu":"0-7"}},{"rank":"22","children":{"core":"3-5","gpu":"1"}}],"nodelist":["node187","node189"]}}"#,
        )
        .unwrap()
        .to_json();
        assert_eq!(r, want);
    }
}
