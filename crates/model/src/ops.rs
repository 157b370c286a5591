//! RFC 4 structural methods: Traversal, Copy, Duplicate, Merge, Unlink,
//! plus sub-graph extraction used by Find and the job views.

use crate::alloc::{JobId, JobKind};
use crate::graph::{flag, Edge, Graph, Pool, VertexId, NONE};
use crate::intern::Sym;
use crate::ModelError;
use std::collections::HashMap;

/// What a traversal does after visiting a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visit {
    /// Visit the children.
    Continue,
    /// Skip the children (prune the subtree).
    Prune,
    /// End the traversal.
    Stop,
}

/// Callbacks of [`Graph::traverse`].  Every method has a default, so an
/// implementation overrides only what it needs.
pub trait Visitor {
    /// Pre-order visit; decides pruning.
    fn pre(&mut self, _g: &Graph, _v: VertexId, _depth: usize) -> Visit {
        Visit::Continue
    }
    /// Post-order visit (after the children, not called for pruned pools'
    /// children, called for pruned pools themselves).
    fn post(&mut self, _g: &Graph, _v: VertexId, _depth: usize) {}
    /// Choose the order of the children about to be visited; removing an
    /// entry prunes it.
    fn order(&mut self, _g: &Graph, _v: VertexId, _children: &mut Vec<VertexId>) {}
}

struct Frame {
    v: VertexId,
    depth: usize,
    kids: Vec<VertexId>,
    pos: usize,
}

impl Graph {
    /// RFC 4 Traversal: depth-first from `from`; the visitor decides
    /// pruning and child order.  Returns false if the visitor stopped it.
    pub fn traverse<V: Visitor + ?Sized>(
        &self,
        from: VertexId,
        vis: &mut V,
    ) -> Result<bool, ModelError> {
        self.check(from)?;
        let mut spare: Vec<Vec<VertexId>> = Vec::new();
        let mut stack: Vec<Frame> = Vec::new();
        match vis.pre(self, from, 0) {
            Visit::Stop => return Ok(false),
            Visit::Prune => {
                vis.post(self, from, 0);
                return Ok(true);
            }
            Visit::Continue => {}
        }
        let mut kids = Vec::new();
        kids.extend(self.kids(from.0));
        vis.order(self, from, &mut kids);
        stack.push(Frame {
            v: from,
            depth: 0,
            kids,
            pos: 0,
        });
        while let Some(top) = stack.last_mut() {
            if top.pos >= top.kids.len() {
                let f = stack.pop();
                if let Some(f) = f {
                    vis.post(self, f.v, f.depth);
                    let mut k = f.kids;
                    k.clear();
                    spare.push(k);
                }
                continue;
            }
            let c = top.kids[top.pos];
            top.pos += 1;
            let depth = top.depth + 1;
            if !self.is_live(c.0) {
                continue;
            }
            match vis.pre(self, c, depth) {
                Visit::Stop => return Ok(false),
                Visit::Prune => {
                    vis.post(self, c, depth);
                    continue;
                }
                Visit::Continue => {}
            }
            let mut kids = spare.pop().unwrap_or_default();
            kids.extend(self.kids(c.0));
            vis.order(self, c, &mut kids);
            stack.push(Frame {
                v: c,
                depth,
                kids,
                pos: 0,
            });
        }
        Ok(true)
    }

    /// Traversal with a closure for the pre-order visit only.
    pub fn walk<F>(&self, from: VertexId, f: F) -> Result<bool, ModelError>
    where
        F: FnMut(&Graph, VertexId, usize) -> Visit,
    {
        struct W<F>(F);
        impl<F: FnMut(&Graph, VertexId, usize) -> Visit> Visitor for W<F> {
            fn pre(&mut self, g: &Graph, v: VertexId, d: usize) -> Visit {
                (self.0)(g, v, d)
            }
        }
        self.traverse(from, &mut W(f))
    }

    /// The [`Pool`] that recreates pool `i` (in this graph's symbols).
    fn pool_of(&self, i: u32) -> Pool {
        let x = &self.v[i as usize];
        Pool {
            ty: x.ty,
            basename: Some(x.basename),
            name: (x.name != NONE).then(|| self.name_of(i).into_owned()),
            id: Some(x.id),
            rank: Some(x.rank),
            size: x.size,
            unit: x.unit,
            uniq_id: Some(x.uniq),
            state: x.state,
        }
    }

    /// Give pool `n` the allocation records `from` holds on its pool `i`.
    fn copy_records(&mut self, n: u32, from: &Graph, i: u32) {
        let (allocs, resv) = from.records_of(i);
        for (kind, list) in [(JobKind::Allocated, allocs), (JobKind::Reserved, resv)] {
            for &(j, units) in list {
                let w = from
                    .job_window(j)
                    .map_or((0, crate::FOREVER), |(_, s, e)| (s, e));
                self.add_record_raw(n, kind, j, units, w);
            }
        }
    }

    /// Build a new graph from the pools for which `keep` is true (taken in
    /// pre-order, roots first).  `size` overrides sizes; `records` keeps
    /// the allocation records of the kept pools.  A kept pool whose parent
    /// is dropped becomes a root that remembers its full path.
    pub(crate) fn extract(
        &self,
        keep: &dyn Fn(u32) -> bool,
        size: Option<&dyn Fn(u32) -> u64>,
        records: bool,
    ) -> Graph {
        let mut out = Graph::with_capacity(0);
        out.syms = self.syms.clone();
        out.hierarchy = self.hierarchy;
        let mut map: Vec<u32> = vec![NONE; self.v.len()];
        let mut order = Vec::new();
        for &r in &self.roots {
            self.preorder_from(r, &mut |i| {
                if keep(i) {
                    order.push(i);
                }
            });
        }
        out.v.reserve(order.len());
        for &i in &order {
            let x = &self.v[i as usize];
            let mut p = self.pool_of(i);
            p.size = size.map_or(x.size, |f| f(i));
            let parent = map.get(x.parent as usize).copied().filter(|&p| p != NONE);
            let ni = match parent {
                Some(np) => out.add_child(VertexId(np), p).map(|v| v.0).unwrap_or(NONE),
                None => {
                    let v = out.add_root(p).0;
                    if x.parent != NONE || self.path_override.contains_key(&i) {
                        out.path_override.insert(v, self.path_of(i).into());
                    }
                    v
                }
            };
            if ni == NONE {
                continue;
            }
            if x.flags & flag::STAGED != 0 {
                // Through stage() so that the aggregates see it.
                let _ = out.stage(VertexId(ni));
            }
            out.v[ni as usize].flags = x.flags
                & (flag::STAGED
                    | flag::XMARK
                    | flag::NO_CONTAINMENT
                    | flag::HAS_PROPS
                    | flag::HAS_TAGS);
            if parent.is_some() {
                if let Some(po) = self.path_override.get(&i) {
                    out.path_override.insert(ni, po.clone());
                }
            }
            copy_side(&self.props, &mut out.props, i, ni);
            copy_side(&self.tags, &mut out.tags, i, ni);
            copy_side(&self.paths, &mut out.paths, i, ni);
            copy_side(&self.uuids, &mut out.uuids, i, ni);
            copy_side(&self.extra, &mut out.extra, i, ni);
            map[i as usize] = ni;
        }
        out.next_uniq = out.next_uniq.max(self.next_uniq);
        let mapped = |i: u32| map.get(i as usize).copied().filter(|&n| n != NONE);
        for e in &self.edges {
            if let (Some(s), Some(d)) = (mapped(e.src), mapped(e.dst)) {
                out.edges.push(Edge {
                    src: s,
                    dst: d,
                    subsystem: e.subsystem,
                    relationship: e.relationship,
                });
            }
        }
        if records {
            for &i in &order {
                if let Some(ni) = mapped(i) {
                    out.copy_records(ni, self, i);
                }
            }
        }
        out
    }

    /// RFC 4 Copy: a new graph with the tree rooted at `v` pruned of
    /// unavailable pools, plus `v`'s ancestors back to the root.  Copied
    /// pools have `size` = available units and nothing allocated.  Fails if
    /// `v` itself is unavailable.
    pub fn copy(&self, v: VertexId) -> Result<Graph, ModelError> {
        let i = self.check(v)?;
        if self.eff_avail(i) == 0 {
            return Err(ModelError::Insufficient {
                path: self.path_of(i),
                requested: 1,
                available: 0,
            });
        }
        let mut keep = vec![false; self.v.len()];
        for a in self.ups(i) {
            keep[a.index()] = true;
        }
        self.keep_available(i, &mut keep);
        Ok(self.extract_available(&keep))
    }

    /// Copy every root (the whole graph's available resources).
    pub fn copy_all(&self) -> Graph {
        let mut keep = vec![false; self.v.len()];
        for &r in &self.roots {
            self.keep_available(r, &mut keep);
        }
        self.extract_available(&keep)
    }

    /// Mark `root` and what is available below it in `keep`: a pre-order
    /// walk that prunes unavailable pools.
    fn keep_available(&self, root: u32, keep: &mut [bool]) {
        let mut stack = vec![root];
        while let Some(x) = stack.pop() {
            if self.own_avail(x) == 0 {
                continue;
            }
            keep[x as usize] = true;
            let mut c = self.v[x as usize].last;
            while c != NONE {
                stack.push(c);
                c = self.v[c as usize].prev;
            }
        }
    }

    /// The copy of the `keep` vertices, each sized to what it has available.
    fn extract_available(&self, keep: &[bool]) -> Graph {
        let size = |x: u32| self.own_avail(x);
        self.extract(&|x| keep[x as usize], Some(&size), false)
    }

    /// RFC 4 Duplicate: an identical copy (including allocation data).
    pub fn duplicate(&self) -> Graph {
        self.clone()
    }

    /// A duplicate without unlinked pools (ids are renumbered).
    pub fn compacted(&self) -> Graph {
        self.extract(&|_| true, None, true)
    }

    /// The pools held by `job` (its own records, everything implied below
    /// exclusively held pools) with their ancestors; sizes are the job's
    /// units (1 for ancestors and implied pools), and pools the job holds
    /// wholly carry the exclusive marker.
    pub fn job_graph(&self, job: JobId) -> Result<Graph, ModelError> {
        let info = self.job(job).ok_or(ModelError::NoJob(job))?;
        let kind = info.kind;
        let mut keep = vec![false; self.v.len()];
        let mut units: HashMap<u32, u64> = HashMap::new();
        let mut xmark = Vec::new();
        for v in &info.vertices {
            let i = v.0;
            let ((al, rs), _) = self.job_amounts(i, job);
            let n = if kind == JobKind::Allocated { al } else { rs };
            units.insert(i, n);
            for a in self.ups(i) {
                keep[a.index()] = true;
            }
            if n == self.v[i as usize].size {
                xmark.push(i);
                self.preorder_from(i, &mut |d| {
                    keep[d as usize] = true;
                    if d != i {
                        units.entry(d).or_insert(self.v[d as usize].size);
                    }
                });
            } else {
                keep[i as usize] = true;
            }
        }
        let size = |x: u32| units.get(&x).copied().unwrap_or(1);
        let mut g = self.extract(&|x| keep[x as usize], Some(&size), false);
        // Exclusive markers on wholly held pools and everything below them.
        let mut marks = vec![false; self.v.len()];
        for i in xmark {
            self.preorder_from(i, &mut |d| marks[d as usize] = true);
        }
        let mut k = 0usize;
        for &r in &self.roots {
            self.preorder_from(r, &mut |i| {
                if keep[i as usize] {
                    if marks[i as usize] {
                        if let Some(x) = g.v.get_mut(k) {
                            x.flags |= flag::XMARK;
                        }
                    }
                    k += 1;
                }
            });
        }
        g.unstage_all();
        Ok(g)
    }

    /// RFC 4 Unlink: remove `v` and its subtree from the hierarchy.  Records
    /// held in the subtree are freed first; extra-subsystem edges touching
    /// it are dropped.  Returns the number of pools removed.
    pub fn unlink(&mut self, v: VertexId) -> Result<usize, ModelError> {
        let i = self.check(v)?;
        let mut sub = Vec::new();
        self.preorder_from(i, &mut |x| sub.push(x));
        for &x in &sub {
            let (allocs, resv) = self.records_of(x);
            let jobs: Vec<(JobKind, JobId)> = allocs
                .iter()
                .map(|e| (JobKind::Allocated, e.0))
                .chain(resv.iter().map(|e| (JobKind::Reserved, e.0)))
                .collect();
            for (k, j) in jobs {
                self.remove_record(x, k, j, None);
            }
        }
        self.agg_link(i, false);
        self.unlink_from_parent(i);
        for &x in &sub {
            let xv = &mut self.v[x as usize];
            xv.flags |= flag::DEAD;
            xv.first = NONE;
            xv.last = NONE;
            xv.parent = NONE;
            xv.next = NONE;
            xv.prev = NONE;
            xv.agg = NONE;
            self.props.remove(&x);
            self.tags.remove(&x);
            self.paths.remove(&x);
            self.path_override.remove(&x);
            self.uuids.remove(&x);
            self.extra.remove(&x);
            self.fanout.remove(&x);
        }
        self.live -= sub.len();
        let live = |e: &Edge, g: &Graph| g.is_live(e.src) && g.is_live(e.dst);
        let edges = std::mem::take(&mut self.edges);
        self.edges = edges.into_iter().filter(|e| live(e, self)).collect();
        Ok(sub.len())
    }

    /// Unlink the pool at a path or URI.
    pub fn unlink_path(&mut self, path: &str) -> Result<usize, ModelError> {
        let v = self
            .lookup(path)
            .ok_or_else(|| ModelError::NoPath(path.into()))?;
        self.unlink(v)
    }

    /// RFC 4 Merge: attach the hierarchy of `other` at its common ancestor
    /// with this graph.  With `at`, `other`'s roots are merged at that path
    /// (a root named like the pool at `at` is merged into it, any other is
    /// attached below it); without, each root of `other` must have a root
    /// of the same name here.  Pools present on both sides (same path)
    /// keep this graph's data; new pools are copied with their data, fresh
    /// uniq ids and their allocation records.  Returns the new pools.
    pub fn merge(&mut self, other: &Graph, at: Option<&str>) -> Result<Vec<VertexId>, ModelError> {
        // Plan: pairs (self vertex, other vertex) to unify and grafts
        // (self parent, other subtree root).
        let mut unify: Vec<(u32, u32)> = Vec::new();
        let mut grafts: Vec<(u32, u32)> = Vec::new();
        let oroots: Vec<u32> = other
            .roots
            .iter()
            .copied()
            .filter(|&r| other.v[r as usize].flags & flag::NO_CONTAINMENT == 0)
            .collect();
        match at {
            Some(p) => {
                let t = self.lookup(p).ok_or_else(|| ModelError::NoPath(p.into()))?;
                for &r in &oroots {
                    let rn = other.name_of(r);
                    if self.name_is(t.0, &rn) {
                        unify.push((t.0, r));
                    } else {
                        match self.kids(t.0).find(|c| self.name_is(c.0, &rn)) {
                            Some(c) => unify.push((c.0, r)),
                            None => grafts.push((t.0, r)),
                        }
                    }
                }
            }
            None => {
                for &r in &oroots {
                    let rn = other.name_of(r);
                    let s = self
                        .roots
                        .iter()
                        .copied()
                        .find(|&s| {
                            self.v[s as usize].flags & flag::NO_CONTAINMENT == 0
                                && self.name_is(s, &rn)
                        })
                        .ok_or_else(|| {
                            ModelError::Structure(format!(
                                "merge: no common ancestor for {}",
                                other.path_of(r)
                            ))
                        })?;
                    unify.push((s, r));
                }
            }
        }
        let mut pairs: Vec<(u32, u32)> = Vec::new();
        while let Some((s, o)) = unify.pop() {
            pairs.push((s, o));
            for oc in other.kids(o) {
                let on = other.name_of(oc.0);
                match self.kids(s).find(|c| self.name_is(c.0, &on)) {
                    Some(sc) => unify.push((sc.0, oc.0)),
                    None => grafts.push((s, oc.0)),
                }
            }
        }
        // Validate records carried by grafted subtrees.
        for &(sp, oroot) in &grafts {
            let mut jobs: Vec<JobId> = Vec::new();
            other.preorder_from(oroot, &mut |x| {
                let (a, r) = other.records_of(x);
                jobs.extend(a.iter().chain(r.iter()).map(|e| e.0));
            });
            jobs.sort_unstable();
            jobs.dedup();
            for j in jobs {
                let Some((kind, s, e)) = other.job_window(j) else {
                    continue;
                };
                if let Some(mine) = self.job_window(j) {
                    if mine != (kind, s, e) {
                        return Err(ModelError::Job {
                            job: j,
                            reason: "has a different kind or window in the merged graph".into(),
                        });
                    }
                }
                let mut a = sp;
                while a != NONE {
                    if self.full_during(a, (s, e)) {
                        return Err(ModelError::AncestorFull {
                            path: format!("{}/{}", self.path_of(sp), other.name_of(oroot)),
                            ancestor: self.path_of(a),
                        });
                    }
                    a = self.v[a as usize].parent;
                }
            }
        }
        // Apply.
        let mut syms: HashMap<Sym, Sym> = HashMap::new();
        let mut map: HashMap<u32, u32> = pairs.iter().map(|&(s, o)| (o, s)).collect();
        let mut added = Vec::new();
        for &(sp, oroot) in &grafts {
            let mut order = Vec::new();
            other.preorder_from(oroot, &mut |x| order.push(x));
            for o in order {
                let ox = &other.v[o as usize];
                let parent = if o == oroot {
                    sp
                } else {
                    match map.get(&ox.parent) {
                        Some(&p) => p,
                        None => continue,
                    }
                };
                let mut tr = |s: Sym, g: &mut Graph| {
                    *syms
                        .entry(s)
                        .or_insert_with(|| g.syms.intern(other.syms.resolve(s)))
                };
                let mut p = other.pool_of(o).uniq_id(self.next_uniq);
                p.ty = tr(ox.ty, self);
                p.basename = Some(tr(ox.basename, self));
                p.unit = tr(ox.unit, self);
                let nv = self.add_child(VertexId(parent), p)?;
                self.v[nv.index()].flags |= ox.flags & flag::XMARK;
                if ox.flags & flag::STAGED != 0 {
                    self.stage(nv)?;
                }
                if let Some(po) = other.path_override.get(&o) {
                    self.path_override.insert(nv.0, po.clone());
                }
                if let Some(l) = other.props.get(&o) {
                    for (k, v) in l {
                        let k = other.syms.resolve(*k).to_string();
                        self.set_property(nv, &k, v)?;
                    }
                }
                if let Some(l) = other.tags.get(&o) {
                    for (k, v) in l {
                        let k = other.syms.resolve(*k).to_string();
                        self.tag(nv, &k, v.as_deref())?;
                    }
                }
                if let Some(l) = other.paths.get(&o) {
                    for (k, v) in l {
                        let k = other.syms.resolve(*k).to_string();
                        self.set_subsystem_path(nv, &k, v)?;
                    }
                }
                if let Some(u) = other.uuids.get(&o) {
                    self.uuids.insert(nv.0, u.clone());
                }
                if let Some(m) = other.extra.get(&o) {
                    self.extra.insert(nv.0, m.clone());
                }
                map.insert(o, nv.0);
                added.push((o, nv.0));
            }
        }
        for &(o, n) in &added {
            self.copy_records(n, other, o);
        }
        for e in &other.edges {
            if let (Some(&s), Some(&d)) = (map.get(&e.src), map.get(&e.dst)) {
                let sub = self.syms.intern(other.syms.resolve(e.subsystem));
                let rel = self.syms.intern(other.syms.resolve(e.relationship));
                let ne = Edge {
                    src: s,
                    dst: d,
                    subsystem: sub,
                    relationship: rel,
                };
                if !self.edges.contains(&ne) {
                    self.edges.push(ne);
                }
            }
        }
        Ok(added.into_iter().map(|(_, n)| VertexId(n)).collect())
    }
}

fn copy_side<T: Clone>(src: &HashMap<u32, T>, dst: &mut HashMap<u32, T>, i: u32, ni: u32) {
    if let Some(x) = src.get(&i) {
        dst.insert(ni, x.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::graph::tests::add_sockets;
    use crate::select::Pred;

    /// RDL's test graph: foo0 > socket{0,1} > core{0-3},{4-7}.
    fn rdl() -> Graph {
        let mut g = Graph::new();
        g.set_hierarchy("default");
        let node = g.intern("node");
        let foo = g.intern("foo");
        let root = g.add_root(Pool::new(node).basename(foo).id(0));
        add_sockets(&mut g, root, 4, None);
        g
    }

    fn agg(g: &Graph) -> Vec<(String, u64)> {
        g.aggregate_all().into_iter().collect()
    }

    fn s(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(a, b)| (a.to_string(), *b)).collect()
    }

    #[test]
    fn rdl_children_and_unlink() {
        let mut g = rdl();
        assert_eq!(agg(&g), s(&[("core", 8), ("node", 1), ("socket", 2)]));
        let r = g.lookup("default:/foo0").unwrap();
        assert_eq!(g.uri(r).unwrap(), "default:/foo0");
        let s0 = g.children(r).next().unwrap();
        assert_eq!(g.uri(s0).unwrap(), "default:/foo0/socket0");
        let c0 = g.children(s0).next().unwrap();
        assert_eq!(g.uri(c0).unwrap(), "default:/foo0/socket0/core0");
        assert_eq!(
            g.aggregate(s0).unwrap().into_iter().collect::<Vec<_>>(),
            s(&[("core", 4), ("socket", 1)])
        );
        assert_eq!(g.unlink_path("default:/foo0/socket0/core1").unwrap(), 1);
        assert_eq!(
            g.aggregate(s0).unwrap().into_iter().collect::<Vec<_>>(),
            s(&[("core", 3), ("socket", 1)])
        );
        let names: Vec<String> = g
            .children(s0)
            .map(|c| g.get(c).unwrap().name().into_owned())
            .collect();
        assert_eq!(names, ["core0", "core2", "core3"]);
        assert_eq!(agg(&g), s(&[("core", 7), ("node", 1), ("socket", 2)]));
        assert_eq!(g.len(), 10);
        g.check_invariants().unwrap();
        assert!(g.get(c0).is_some());
        assert_eq!(
            g.unlink_path("/foo0/nothing"),
            Err(ModelError::NoPath("/foo0/nothing".into()))
        );
    }

    #[test]
    fn rdl_copy_and_dup() {
        let g = rdl();
        let s1 = g.lookup("/foo0/socket1").unwrap();
        let slice = g.copy(s1).unwrap();
        assert_eq!(agg(&slice), s(&[("core", 4), ("node", 1), ("socket", 1)]));
        assert_eq!(
            slice
                .get(slice.lookup("default:/foo0/socket1").unwrap())
                .unwrap()
                .name(),
            "socket1"
        );
        slice.check_invariants().unwrap();
        let dup = g.duplicate();
        assert_eq!(agg(&dup), s(&[("core", 8), ("node", 1), ("socket", 2)]));
    }

    #[test]
    fn copy_prunes_unavailable_and_sizes_to_available() {
        let mut g = rdl();
        let mem = g.intern("memory");
        let s0 = g.lookup("/foo0/socket0").unwrap();
        let m = g.add_child(s0, Pool::new(mem).size(1024)).unwrap();
        g.allocate(m, 1000, 1).unwrap();
        let c2 = g.lookup("/foo0/socket0/core2").unwrap();
        g.allocate(c2, 1, 2).unwrap();
        let s1 = g.lookup("/foo0/socket1").unwrap();
        g.allocate(s1, 1, 3).unwrap();
        let root = g.root().unwrap();
        let c = g.copy(root).unwrap();
        assert_eq!(
            agg(&c),
            s(&[("core", 3), ("memory", 24), ("node", 1), ("socket", 1)])
        );
        let cm = c.lookup("/foo0/socket0/memory").unwrap();
        assert_eq!(c.size(cm).unwrap(), 24);
        assert_eq!(c.allocated(cm).unwrap(), 0);
        assert!(c.lookup("/foo0/socket0/core2").is_none());
        assert!(c.lookup("/foo0/socket1").is_none());
        assert!(c.jobs().is_empty());
        c.check_invariants().unwrap();
        // Copying an unavailable pool fails.
        let c5 = g.lookup("/foo0/socket1/core5").unwrap();
        assert!(matches!(g.copy(c5), Err(ModelError::Insufficient { .. })));
        assert_eq!(c.len(), g.copy_all().len());
    }

    #[test]
    fn merge_at_common_ancestor() {
        // RDL test_conf: pieces attached at paths.
        let mut g = Graph::new();
        let p = g.pool("foo");
        g.add_root(p);
        let mut n0 = Graph::new();
        let p = n0.pool("foo");
        let r = n0.add_root(p);
        let bar = n0.intern("bar");
        let node = n0.intern("node");
        let n = n0
            .add_child(r, Pool::new(node).basename(bar).id(0))
            .unwrap();
        for s in 0..2 {
            let p = n0.pool("socket").id(s);
            n0.add_child(n, p).unwrap();
        }
        let added = g.merge(&n0, None).unwrap();
        assert_eq!(added.len(), 3);
        let mut n1 = Graph::new();
        let p = n1.pool("node").basename(bar).id(1);
        n1.add_root(p);
        g.merge(&n1, Some("/foo")).unwrap();
        let mut gpu = Graph::new();
        let p = gpu.pool("gpu").id(0);
        gpu.add_root(p);
        g.merge(&gpu, Some("/foo/bar0")).unwrap();
        assert_eq!(
            agg(&g),
            s(&[("foo", 1), ("gpu", 1), ("node", 2), ("socket", 2)])
        );
        assert!(g.lookup("/foo/bar0/gpu0").is_some());
        // Merging the same piece again adds nothing.
        assert!(g.merge(&n0, None).unwrap().is_empty());
        assert_eq!(g.len(), 6);
        // No common ancestor.
        let mut other = Graph::new();
        let p = other.pool("cluster");
        other.add_root(p);
        assert!(matches!(
            g.merge(&other, None),
            Err(ModelError::Structure(_))
        ));
        g.check_invariants().unwrap();
    }

    #[test]
    fn merge_a_copy_back_grows_the_graph() {
        let g = rdl();
        let mut left = g.duplicate();
        left.unlink_path("/foo0/socket1").unwrap();
        let s1 = g.lookup("/foo0/socket1").unwrap();
        let piece = g.copy(s1).unwrap();
        let added = left.merge(&piece, None).unwrap();
        assert_eq!(added.len(), 5);
        assert_eq!(agg(&left), agg(&g));
        // Fresh uniq ids for the new pools.
        let mut u: Vec<i64> = left
            .vertices()
            .map(|v| left.get(v).unwrap().uniq_id())
            .collect();
        u.sort();
        u.dedup();
        assert_eq!(u.len(), left.len());
        left.check_invariants().unwrap();
    }

    #[test]
    fn merge_carries_records_and_refuses_conflicts() {
        let g = rdl();
        let mut piece = g.find(&Pred::parse("names=socket1").unwrap());
        let c = piece.lookup("/foo0/socket1/core4").unwrap();
        piece.allocate(c, 1, 77).unwrap();
        let mut left = g.duplicate();
        left.unlink_path("/foo0/socket1").unwrap();
        let mut blocked = left.duplicate();
        let root = blocked.root().unwrap();
        blocked.allocate(root, 1, 5).unwrap();
        assert!(matches!(
            blocked.merge(&piece, None),
            Err(ModelError::AncestorFull { .. })
        ));
        assert_eq!(blocked.len(), left.len());
        left.merge(&piece, None).unwrap();
        let c = left.lookup("/foo0/socket1/core4").unwrap();
        assert_eq!(left.allocations(c).unwrap(), vec![(77, 1)]);
        assert_eq!(left.shared(left.root().unwrap()).unwrap(), vec![77]);
        left.check_invariants().unwrap();
    }

    #[test]
    fn unlink_frees_records_and_edges() {
        let mut g = rdl();
        let c5 = g.lookup("/foo0/socket1/core5").unwrap();
        let c0 = g.lookup("/foo0/socket0/core0").unwrap();
        g.allocate(c5, 1, 1).unwrap();
        g.allocate(c0, 1, 1).unwrap();
        g.add_edge(c0, c5, "network", "link").unwrap();
        let s1 = g.lookup("/foo0/socket1").unwrap();
        assert_eq!(g.unlink(s1).unwrap(), 5);
        assert_eq!(g.job(1).unwrap().vertices, vec![c0]);
        assert_eq!(g.edges().count(), 0);
        assert!(g.get(c5).is_none());
        assert_eq!(g.unlink(s1), Err(ModelError::NoVertex(s1.0)));
        g.check_invariants().unwrap();
        let c = g.compacted();
        assert_eq!(c.len(), g.len());
        assert_eq!(c.arena_len(), g.len());
        c.check_invariants().unwrap();
        // Unlinking a root empties the graph.
        let r = g.root().unwrap();
        g.unlink(r).unwrap();
        assert!(g.is_empty());
        assert!(g.jobs().is_empty());
        g.check_invariants().unwrap();
    }

    #[test]
    fn traversal_prunes_orders_and_stops() {
        let g = rdl();
        let root = g.root().unwrap();
        struct V(Vec<String>);
        impl Visitor for V {
            fn pre(&mut self, g: &Graph, v: VertexId, d: usize) -> Visit {
                let p = g.get(v).unwrap();
                self.0.push(format!("{}{}", "-".repeat(d), p.name()));
                if p.name() == "socket0" {
                    Visit::Prune
                } else {
                    Visit::Continue
                }
            }
            fn order(&mut self, _g: &Graph, _v: VertexId, c: &mut Vec<VertexId>) {
                c.reverse();
            }
        }
        let mut v = V(Vec::new());
        assert!(g.traverse(root, &mut v).unwrap());
        assert_eq!(
            v.0,
            ["foo0", "-socket1", "--core7", "--core6", "--core5", "--core4", "-socket0"]
        );
        let mut n = 0;
        let done = g
            .walk(root, |_, _, _| {
                n += 1;
                if n == 3 {
                    Visit::Stop
                } else {
                    Visit::Continue
                }
            })
            .unwrap();
        assert!(!done);
        assert_eq!(n, 3);
        // Post-order sees children first.
        struct P(Vec<String>);
        impl Visitor for P {
            fn post(&mut self, g: &Graph, v: VertexId, _d: usize) {
                self.0.push(g.get(v).unwrap().name().into_owned());
            }
        }
        let s1 = g.lookup("/foo0/socket1").unwrap();
        let mut p = P(Vec::new());
        g.traverse(s1, &mut p).unwrap();
        assert_eq!(p.0, ["core4", "core5", "core6", "core7", "socket1"]);
    }

    #[test]
    fn job_graph_marks_exclusive() {
        let mut g = rdl();
        let s1 = g.lookup("/foo0/socket1").unwrap();
        g.allocate(s1, 1, 9).unwrap();
        let c0 = g.lookup("/foo0/socket0/core0").unwrap();
        g.allocate(c0, 1, 9).unwrap();
        let j = g.job_graph(9).unwrap();
        assert_eq!(j.len(), 1 + 1 + 1 + 1 + 4);
        let s1j = j.lookup("/foo0/socket1").unwrap();
        assert!(j.get(s1j).unwrap().exclusive_marker());
        let c7 = j.lookup("/foo0/socket1/core7").unwrap();
        assert!(j.get(c7).unwrap().exclusive_marker());
        let s0j = j.lookup("/foo0/socket0").unwrap();
        assert!(!j.get(s0j).unwrap().exclusive_marker());
        assert!(matches!(g.job_graph(10), Err(ModelError::NoJob(10))));
    }
}
