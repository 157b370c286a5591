//! The composite resource pool graph: an arena of pools linked into a
//! containment forest, with sparse side tables for the rarely used data.
//!
//! Memory layout: every pool is one fixed-size [`Vertex`] record (80 bytes)
//! in a `Vec`; type names, basenames, units and keys are interned [`Sym`]s;
//! names are stored only when they differ from the RFC 4 default
//! (`basename` + `id`); properties, tags, non-containment paths, string
//! UUIDs and unknown JGF keys live in hash maps keyed by vertex index and
//! cost nothing for pools that do not use them.  Children are an intrusive
//! doubly linked list (first/last child, next/prev sibling), so adding and
//! unlinking are O(1) and child order is preserved.

use crate::alloc::{Job, JobId, Records};
use crate::intern::{Interner, Sym};
use crate::ModelError;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

pub(crate) const NONE: u32 = u32::MAX;

/// Tags of one pool: key and optional value.
pub(crate) type TagList = Vec<(Sym, Option<Box<str>>)>;
/// Per-vertex lists of (key, value): properties or tags.
type Keyed<V> = HashMap<u32, Vec<(Sym, V)>>;

/// Index of a pool in its [`Graph`].  Ids are only meaningful for the graph
/// that issued them; methods validate them and report
/// [`ModelError::NoVertex`] for stale or foreign ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VertexId(pub(crate) u32);

impl VertexId {
    /// Position in the arena.
    pub fn index(self) -> usize {
        self.0 as usize
    }
    /// Rebuild an id from [`VertexId::index`].
    pub fn from_index(i: usize) -> Option<VertexId> {
        u32::try_from(i).ok().filter(|&n| n != NONE).map(VertexId)
    }
}

impl fmt::Display for VertexId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// RFC 4 resource state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum State {
    #[default]
    Up,
    Down,
    Degraded,
    Failing,
    Unknown,
    Null,
}

impl State {
    /// The lower-case name used in RFC 4 and in our JGF `state` key.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Up => "up",
            State::Down => "down",
            State::Degraded => "degraded",
            State::Failing => "failing",
            State::Unknown => "unknown",
            State::Null => "null",
        }
    }
    /// Does a pool in this state offer its units to new work?  Only `up`
    /// does.  `degraded` is defined here as "keeps what it runs, takes
    /// nothing new" (like a Flux drain: RFC 4 lists the state without
    /// semantics, and a degraded pool cannot promise its full size), and
    /// `down`, `failing`, `unknown` and `null` likewise.  An unavailable
    /// pool counts 0 in Available, Aggregate, Copy and Match, and so do
    /// its descendants (the composite rule).  Existing allocations stay.
    pub fn is_available(self) -> bool {
        self == State::Up
    }
    /// Every state, in [`State::as_str`] order of declaration.
    pub const ALL: [State; 6] = [
        State::Up,
        State::Down,
        State::Degraded,
        State::Failing,
        State::Unknown,
        State::Null,
    ];
    /// Parse a state name (case-sensitive, as written by [`State::as_str`]).
    pub fn parse(s: &str) -> Option<State> {
        Some(match s {
            "up" => State::Up,
            "down" => State::Down,
            "degraded" => State::Degraded,
            "failing" => State::Failing,
            "unknown" => State::Unknown,
            "null" => State::Null,
            _ => return None,
        })
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

pub(crate) mod flag {
    pub const DEAD: u16 = 1;
    pub const STAGED: u16 = 2;
    /// `exclusive: true` read from a JGF (Fluxion's marker for pools handed
    /// over exclusively); kept so that the JGF round trip is lossless.
    pub const XMARK: u16 = 4;
    /// The pool has no path in the containment hierarchy (it only belongs
    /// to another subsystem, e.g. a power panel).
    pub const NO_CONTAINMENT: u16 = 8;
    pub const HAS_PROPS: u16 = 16;
    pub const HAS_TAGS: u16 = 32;
}

/// One pool: the fixed-size part.
#[derive(Debug, Clone)]
pub(crate) struct Vertex {
    pub size: u64,
    /// Numeric id appended to the basename; -1 = unassigned.
    pub id: i64,
    /// Execution target (broker rank); -1 = none.
    pub rank: i64,
    /// Unique id (Fluxion `uniq_id`, the JGF vertex id).
    pub uniq: i64,
    pub ty: Sym,
    pub basename: Sym,
    pub unit: Sym,
    /// Index into `Graph::names`, or NONE for the default name.
    pub name: u32,
    pub parent: u32,
    pub first: u32,
    pub last: u32,
    pub next: u32,
    pub prev: u32,
    /// Index into `Graph::recs` (allocation records), or NONE.
    pub rec: u32,
    /// Index into `Graph::aggs` (per-type availability below), or NONE.
    pub agg: u32,
    pub flags: u16,
    pub state: State,
}

/// An edge of a subsystem other than containment (power, network, ...).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Edge {
    pub src: u32,
    pub dst: u32,
    pub subsystem: Sym,
    pub relationship: Sym,
}

/// A public view of an extra-subsystem edge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdgeRef<'a> {
    pub source: VertexId,
    pub target: VertexId,
    pub subsystem: &'a str,
    pub relationship: &'a str,
}

/// Chained setters of [`Pool`], one per field: `field(arg: T) = value;`.
macro_rules! setters {
    ($($field:ident($v:ident: $t:ty) = $val:expr;)*) => {
        $(
            pub fn $field(mut self, $v: $t) -> Pool {
                self.$field = $val;
                self
            }
        )*
    };
}

/// Everything needed to create a pool.  Build with [`Pool::new`] (or
/// [`Graph::pool`]) and the setter methods.
#[derive(Debug, Clone)]
pub struct Pool {
    pub ty: Sym,
    pub basename: Option<Sym>,
    pub name: Option<String>,
    pub id: Option<i64>,
    pub rank: Option<i64>,
    pub size: u64,
    pub unit: Sym,
    pub uniq_id: Option<i64>,
    pub state: State,
}

impl Pool {
    /// A pool of one unit of type `ty`, with every other datum defaulted.
    pub fn new(ty: Sym) -> Pool {
        Pool {
            ty,
            basename: None,
            name: None,
            id: None,
            rank: None,
            size: 1,
            unit: Sym::EMPTY,
            uniq_id: None,
            state: State::Up,
        }
    }
    setters! {
        basename(b: Sym) = Some(b);
        name(n: impl Into<String>) = Some(n.into());
        id(id: i64) = Some(id);
        rank(r: i64) = Some(r);
        size(s: u64) = s;
        unit(u: Sym) = u;
        uniq_id(u: i64) = Some(u);
        state(s: State) = s;
    }
}

/// The composite resource pool graph (see the crate documentation).
#[derive(Debug, Clone)]
pub struct Graph {
    pub(crate) v: Vec<Vertex>,
    pub(crate) syms: Interner,
    pub(crate) names: Vec<Box<str>>,
    pub(crate) props: HashMap<u32, Vec<(Sym, Box<str>)>>,
    pub(crate) tags: HashMap<u32, TagList>,
    /// Paths in subsystems other than the containment hierarchy.
    pub(crate) paths: HashMap<u32, Vec<(Sym, Box<str>)>>,
    /// Containment paths that differ from the one derived from names.
    pub(crate) path_override: HashMap<u32, Box<str>>,
    /// Non-numeric UUIDs (JGF ids or `uuid` keys).
    pub(crate) uuids: HashMap<u32, Box<str>>,
    /// Unknown JGF vertex metadata keys, kept for lossless round trips.
    pub(crate) extra: HashMap<u32, serde_json::Map<String, serde_json::Value>>,
    pub(crate) edges: Vec<Edge>,
    pub(crate) roots: Vec<u32>,
    pub(crate) recs: Vec<Records>,
    pub(crate) free_recs: Vec<u32>,
    pub(crate) aggs: Vec<Vec<(Sym, u64)>>,
    pub(crate) jobs: HashMap<JobId, Job>,
    /// Block-max indexes over the children of wide pools (see `fanout`).
    pub(crate) fanout: HashMap<u32, crate::fanout::Fanout>,
    /// Children count from which a pool gets a fan-out index.
    pub(crate) fanout_min: usize,
    /// Set by structural changes; `ensure_fanout` rescans only then.
    pub(crate) fanout_dirty: bool,
    pub(crate) hierarchy: Sym,
    pub(crate) live: usize,
    pub(crate) next_uniq: i64,
}

impl Default for Graph {
    fn default() -> Self {
        Graph::new()
    }
}

impl Graph {
    /// An empty graph whose hierarchy (URI scheme) is `containment`.
    pub fn new() -> Graph {
        Graph::with_capacity(0)
    }

    /// An empty graph with room for `n` pools.
    pub fn with_capacity(n: usize) -> Graph {
        let mut syms = Interner::default();
        let hierarchy = syms.intern("containment");
        Graph {
            v: Vec::with_capacity(n),
            syms,
            names: Vec::new(),
            props: HashMap::new(),
            tags: HashMap::new(),
            paths: HashMap::new(),
            path_override: HashMap::new(),
            uuids: HashMap::new(),
            extra: HashMap::new(),
            edges: Vec::new(),
            roots: Vec::new(),
            recs: Vec::new(),
            free_recs: Vec::new(),
            aggs: Vec::new(),
            jobs: HashMap::new(),
            fanout: HashMap::new(),
            fanout_min: crate::fanout::FANOUT_MIN,
            fanout_dirty: true,
            hierarchy,
            live: 0,
            next_uniq: 0,
        }
    }

    /// Reserve room for `n` more pools.
    pub fn reserve_vertices(&mut self, n: usize) {
        self.v.reserve(n);
    }

    /// Name of the containment hierarchy, the scheme of every URI.
    pub fn hierarchy(&self) -> &str {
        self.syms.resolve(self.hierarchy)
    }

    /// Rename the containment hierarchy (`containment` by default; RDL used
    /// `default`).
    pub fn set_hierarchy(&mut self, name: &str) {
        self.hierarchy = self.syms.intern(name);
    }

    /// Intern a string (type name, basename, unit, key) for use in [`Pool`].
    pub fn intern(&mut self, s: &str) -> Sym {
        self.syms.intern(s)
    }

    /// The string behind a [`Sym`].
    pub fn resolve(&self, s: Sym) -> &str {
        self.syms.resolve(s)
    }

    /// A [`Pool`] of type `ty` (interned) with default data.
    pub fn pool(&mut self, ty: &str) -> Pool {
        Pool::new(self.syms.intern(ty))
    }

    /// Number of live pools.
    pub fn len(&self) -> usize {
        self.live
    }

    /// True when the graph holds no live pool.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Arena length (live and unlinked pools).
    pub fn arena_len(&self) -> usize {
        self.v.len()
    }

    pub(crate) fn is_live(&self, v: u32) -> bool {
        self.v
            .get(v as usize)
            .is_some_and(|x| x.flags & flag::DEAD == 0)
    }

    pub(crate) fn check(&self, v: VertexId) -> Result<u32, ModelError> {
        if self.is_live(v.0) {
            Ok(v.0)
        } else {
            Err(ModelError::NoVertex(v.0))
        }
    }

    /// Is `v` a live pool of this graph?
    pub fn contains(&self, v: VertexId) -> bool {
        self.is_live(v.0)
    }

    fn push_vertex(&mut self, p: Pool, parent: u32) -> u32 {
        let uniq = p.uniq_id.unwrap_or(self.next_uniq);
        if uniq >= self.next_uniq {
            self.next_uniq = uniq.saturating_add(1);
        }
        self.push_pool(p, parent, uniq)
    }

    /// Append the vertex of `p` with parent `parent` (not linked in as its
    /// child) and unique id `uniq`; returns its index.
    pub(crate) fn push_pool(&mut self, p: Pool, parent: u32, uniq: i64) -> u32 {
        let idx = self.v.len() as u32;
        let basename = p.basename.unwrap_or(p.ty);
        let id = p.id.unwrap_or(-1);
        let mut vx = Vertex {
            size: p.size,
            id,
            rank: p.rank.unwrap_or(-1),
            uniq,
            ty: p.ty,
            basename,
            unit: p.unit,
            name: NONE,
            parent,
            first: NONE,
            last: NONE,
            next: NONE,
            prev: NONE,
            rec: NONE,
            agg: NONE,
            flags: 0,
            state: p.state,
        };
        if let Some(n) = p.name {
            if !default_name_eq(self.syms.resolve(basename), id, &n) {
                vx.name = self.names.len() as u32;
                self.names.push(n.into_boxed_str());
            }
        }
        self.v.push(vx);
        self.live += 1;
        idx
    }

    /// Add a root pool (the top of a containment hierarchy).
    pub fn add_root(&mut self, p: Pool) -> VertexId {
        let idx = self.push_vertex(p, NONE);
        self.roots.push(idx);
        VertexId(idx)
    }

    /// Add `p` as the last child of `parent`.
    pub fn add_child(&mut self, parent: VertexId, p: Pool) -> Result<VertexId, ModelError> {
        let par = self.check(parent)?;
        if self.v.len() >= NONE as usize - 1 {
            return Err(ModelError::Full);
        }
        let idx = self.push_vertex(p, par);
        self.link_last(par, idx);
        self.agg_link(idx, true);
        Ok(VertexId(idx))
    }

    pub(crate) fn link_last(&mut self, par: u32, c: u32) {
        self.fanout_dirty = true;
        if !self.fanout.is_empty() {
            self.fanout.remove(&par);
        }
        let last = self.v[par as usize].last;
        {
            let cv = &mut self.v[c as usize];
            cv.parent = par;
            cv.prev = last;
            cv.next = NONE;
        }
        if last == NONE {
            self.v[par as usize].first = c;
        } else {
            self.v[last as usize].next = c;
        }
        self.v[par as usize].last = c;
    }

    pub(crate) fn unlink_from_parent(&mut self, c: u32) {
        let (par, prev, next) = {
            let cv = &self.v[c as usize];
            (cv.parent, cv.prev, cv.next)
        };
        if par == NONE {
            self.roots.retain(|&r| r != c);
            return;
        }
        self.fanout_dirty = true;
        if !self.fanout.is_empty() {
            self.fanout.remove(&par);
        }
        if prev == NONE {
            self.v[par as usize].first = next;
        } else {
            self.v[prev as usize].next = next;
        }
        if next == NONE {
            self.v[par as usize].last = prev;
        } else {
            self.v[next as usize].prev = prev;
        }
        let cv = &mut self.v[c as usize];
        cv.parent = NONE;
        cv.prev = NONE;
        cv.next = NONE;
    }

    /// Live root pools, in insertion order.
    pub fn roots(&self) -> impl Iterator<Item = VertexId> + '_ {
        self.roots.iter().map(|&r| VertexId(r))
    }

    /// The roots that belong to the containment hierarchy.
    pub(crate) fn containment_roots(&self) -> impl Iterator<Item = &u32> + '_ {
        self.roots
            .iter()
            .filter(|&&r| self.v[r as usize].flags & flag::NO_CONTAINMENT == 0)
    }

    /// The root of the containment hierarchy when there is exactly one
    /// (what an aggregate of the whole graph reports as its path).
    pub fn containment_root(&self) -> Option<VertexId> {
        let mut it = self.containment_roots();
        match (it.next(), it.next()) {
            (Some(&r), None) => Some(VertexId(r)),
            _ => None,
        }
    }

    /// The first root, if any.
    pub fn root(&self) -> Option<VertexId> {
        self.roots.first().map(|&r| VertexId(r))
    }

    /// Live pools in arena order.
    pub fn vertices(&self) -> impl Iterator<Item = VertexId> + '_ {
        self.v
            .iter()
            .enumerate()
            .filter(|(_, x)| x.flags & flag::DEAD == 0)
            .map(|(i, _)| VertexId(i as u32))
    }

    /// A read-only view of pool `v`.
    pub fn get(&self, v: VertexId) -> Option<PoolRef<'_>> {
        self.is_live(v.0).then_some(PoolRef { g: self, i: v.0 })
    }

    /// Like [`Graph::get`] but with an error naming the id.
    pub fn try_get(&self, v: VertexId) -> Result<PoolRef<'_>, ModelError> {
        self.get(v).ok_or(ModelError::NoVertex(v.0))
    }

    pub(crate) fn view(&self, i: u32) -> PoolRef<'_> {
        PoolRef { g: self, i }
    }

    fn links(&self, cur: u32, link: fn(&Vertex) -> u32) -> Links<'_> {
        Links { g: self, cur, link }
    }

    /// Children of `v` in order (empty for an unknown id).
    pub fn children(&self, v: VertexId) -> Links<'_> {
        self.links(self.get(v).map_or(NONE, |p| p.x().first), |x| x.next)
    }

    pub(crate) fn kids(&self, v: u32) -> Links<'_> {
        self.links(self.v[v as usize].first, |x| x.next)
    }

    /// Parent of `v` in the containment hierarchy.
    pub fn parent(&self, v: VertexId) -> Option<VertexId> {
        self.get(v)?.parent()
    }

    /// Strict ancestors of `v`, nearest first.
    pub fn ancestors(&self, v: VertexId) -> Links<'_> {
        self.links(self.get(v).map_or(NONE, |p| p.x().parent), |x| x.parent)
    }

    pub(crate) fn ups(&self, v: u32) -> Links<'_> {
        self.links(self.v[v as usize].parent, |x| x.parent)
    }

    /// Depth of `v` (roots are 0).
    pub fn depth(&self, v: VertexId) -> Option<usize> {
        self.get(v).map(|_| self.ups(v.0).count())
    }

    /// Is `a` a strict ancestor of `b`?
    pub fn is_ancestor(&self, a: VertexId, b: VertexId) -> bool {
        self.ancestors(b).any(|x| x == a)
    }

    pub(crate) fn name_of(&self, i: u32) -> Cow<'_, str> {
        let x = &self.v[i as usize];
        if x.name != NONE {
            if let Some(n) = self.names.get(x.name as usize) {
                return Cow::Borrowed(n);
            }
        }
        let b = self.syms.resolve(x.basename);
        if x.id == -1 {
            Cow::Borrowed(b)
        } else {
            Cow::Owned(format!("{b}{}", x.id))
        }
    }

    pub(crate) fn name_is(&self, i: u32, s: &str) -> bool {
        let x = &self.v[i as usize];
        if x.name != NONE {
            return self.names.get(x.name as usize).is_some_and(|n| &**n == s);
        }
        default_name_eq(self.syms.resolve(x.basename), x.id, s)
    }

    /// Containment path of `v`, e.g. `/cluster0/node3/core7`.
    pub fn path(&self, v: VertexId) -> Option<String> {
        self.is_live(v.0).then(|| self.path_of(v.0))
    }

    pub(crate) fn path_of(&self, i: u32) -> String {
        let mut chain = Vec::new();
        let mut cur = i;
        let mut base: Option<&str> = None;
        while cur != NONE {
            if let Some(p) = self.path_override.get(&cur) {
                base = Some(p);
                break;
            }
            chain.push(cur);
            cur = self.v[cur as usize].parent;
        }
        let mut s = String::with_capacity(16 * (chain.len() + 1));
        if let Some(b) = base {
            s.push_str(b);
        }
        for &c in chain.iter().rev() {
            s.push('/');
            s.push_str(&self.name_of(c));
        }
        s
    }

    /// RFC 4 URI of `v`: `<hierarchy>:<path>`, e.g.
    /// `containment:/cluster0/node3/core7`.
    pub fn uri(&self, v: VertexId) -> Option<String> {
        self.path(v).map(|p| format!("{}:{}", self.hierarchy(), p))
    }

    /// Find the pool at a path (`/cluster0/node3`) or URI
    /// (`containment:/cluster0/node3`).
    pub fn lookup(&self, path_or_uri: &str) -> Option<VertexId> {
        let path = match path_or_uri.split_once(':') {
            Some((scheme, rest)) if scheme == self.hierarchy() => rest,
            Some(_) => return None,
            None => path_or_uri,
        };
        if !path.starts_with('/') {
            return None;
        }
        if !self.path_override.is_empty() {
            // Longest override that prefixes the path, then walk from it.
            let mut best: Option<(usize, u32)> = None;
            for (&v, p) in &self.path_override {
                let p: &str = p;
                if !self.is_live(v) {
                    continue;
                }
                let hit = path == p || (path.starts_with(p) && path[p.len()..].starts_with('/'));
                if hit && best.map_or(true, |(l, _)| p.len() > l) {
                    best = Some((p.len(), v));
                }
            }
            if let Some((l, v)) = best {
                return self.walk_names(v, &path[l..]);
            }
        }
        let mut comps = path[1..].split('/');
        let first = comps.next()?;
        let root = self.roots.iter().copied().find(|&r| {
            self.v[r as usize].flags & flag::NO_CONTAINMENT == 0 && self.name_is(r, first)
        })?;
        let rest = &path[1 + first.len()..];
        self.walk_names(root, rest)
    }

    fn walk_names(&self, from: u32, rest: &str) -> Option<VertexId> {
        let mut cur = from;
        for comp in rest.split('/').filter(|c| !c.is_empty()) {
            cur = self
                .kids(cur)
                .map(|c| c.0)
                .find(|&c| self.name_is(c, comp))?;
        }
        Some(VertexId(cur))
    }

    /// Set the RFC 4 state of `v`.
    /// An unavailable state (see [`State::is_available`]) takes the pool
    /// and everything below it out of Available, Aggregate, Copy and Match.
    pub fn set_state(&mut self, v: VertexId, s: State) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let old = self.own_avail(i);
        self.v[i as usize].state = s;
        let new = self.own_avail(i);
        self.avail_changed(i, old, new);
        Ok(())
    }

    /// Set a static property (`value` may be empty, as R properties are).
    pub fn set_property(&mut self, v: VertexId, key: &str, value: &str) -> Result<(), ModelError> {
        self.set_keyed(v, key, value.into(), flag::HAS_PROPS, |g| &mut g.props)
    }

    /// Remove a property; returns whether it was present.
    pub fn remove_property(&mut self, v: VertexId, key: &str) -> Result<bool, ModelError> {
        self.remove_keyed(v, key, flag::HAS_PROPS, |g| &mut g.props)
    }

    /// RFC 4 Tag(K, [V]): set a dynamic tag, with an optional value.
    pub fn tag(&mut self, v: VertexId, key: &str, value: Option<&str>) -> Result<(), ModelError> {
        self.set_keyed(v, key, value.map(Box::from), flag::HAS_TAGS, |g| {
            &mut g.tags
        })
    }

    /// Remove a tag; returns whether it was present.
    pub fn untag(&mut self, v: VertexId, key: &str) -> Result<bool, ModelError> {
        self.remove_keyed(v, key, flag::HAS_TAGS, |g| &mut g.tags)
    }

    /// Set `key` to `val` in `v`'s list of `map` (properties or tags) and
    /// mark `v` as having one.
    fn set_keyed<V>(
        &mut self,
        v: VertexId,
        key: &str,
        val: V,
        has: u16,
        map: fn(&mut Graph) -> &mut Keyed<V>,
    ) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let k = self.syms.intern(key);
        let list = map(self).entry(i).or_default();
        match list.iter_mut().find(|(kk, _)| *kk == k) {
            Some(e) => e.1 = val,
            None => list.push((k, val)),
        }
        self.v[i as usize].flags |= has;
        Ok(())
    }

    /// Remove `key` from `v`'s list of `map`, dropping the list and the
    /// mark once empty; returns whether `key` was there.
    fn remove_keyed<V>(
        &mut self,
        v: VertexId,
        key: &str,
        has: u16,
        map: fn(&mut Graph) -> &mut Keyed<V>,
    ) -> Result<bool, ModelError> {
        let i = self.check(v)?;
        let (Some(k), Some(list)) = (self.syms.get(key), map(self).get_mut(&i)) else {
            return Ok(false);
        };
        let n = list.len();
        list.retain(|(kk, _)| *kk != k);
        let found = list.len() != n;
        if list.is_empty() {
            map(self).remove(&i);
            self.v[i as usize].flags &= !has;
        }
        Ok(found)
    }

    /// Mark `v` staged (a temporary lock while it is considered for a job).
    /// A staged pool is locked for the job being considered: it leaves
    /// Available (and Aggregate, Copy, Match) until unstaged, but
    /// Allocate on it is allowed (that is how the stager takes it).
    pub fn stage(&mut self, v: VertexId) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let old = self.own_avail(i);
        self.v[i as usize].flags |= flag::STAGED;
        let new = self.own_avail(i);
        self.avail_changed(i, old, new);
        Ok(())
    }

    /// Clear the staged mark of `v`.
    pub fn unstage(&mut self, v: VertexId) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let old = self.own_avail(i);
        self.v[i as usize].flags &= !flag::STAGED;
        let new = self.own_avail(i);
        self.avail_changed(i, old, new);
        Ok(())
    }

    /// Clear every staged mark.
    pub fn unstage_all(&mut self) {
        let staged: Vec<u32> = (0..self.v.len() as u32)
            .filter(|&i| self.is_live(i) && self.v[i as usize].flags & flag::STAGED != 0)
            .collect();
        for i in staged {
            let _ = self.unstage(VertexId(i));
        }
    }

    /// Set (or replace) the path of `v` in another subsystem, e.g.
    /// `("power", "/powerpanel0/pdu0/node0")`.  Setting the containment
    /// hierarchy's own name records an explicit containment path.
    pub fn set_subsystem_path(
        &mut self,
        v: VertexId,
        subsystem: &str,
        path: &str,
    ) -> Result<(), ModelError> {
        let i = self.check(v)?;
        let s = self.syms.intern(subsystem);
        if s == self.hierarchy {
            self.v[i as usize].flags &= !flag::NO_CONTAINMENT;
            if self.path_of_derived(i) == path {
                self.path_override.remove(&i);
            } else {
                self.path_override.insert(i, path.into());
            }
            return Ok(());
        }
        let list = self.paths.entry(i).or_default();
        match list.iter_mut().find(|(k, _)| *k == s) {
            Some(e) => e.1 = path.into(),
            None => list.push((s, path.into())),
        }
        Ok(())
    }

    /// The path `v` would have without its own override.
    pub(crate) fn path_of_derived(&self, i: u32) -> String {
        let p = self.v[i as usize].parent;
        let mut s = if p == NONE {
            String::new()
        } else {
            self.path_of(p)
        };
        s.push('/');
        s.push_str(&self.name_of(i));
        s
    }

    /// Mark `v` as outside the containment hierarchy (only in other
    /// subsystems).  Only allowed for roots.
    pub fn set_containment_member(&mut self, v: VertexId, member: bool) -> Result<(), ModelError> {
        let i = self.check(v)?;
        if !member && self.v[i as usize].parent != NONE {
            return Err(ModelError::Structure(format!(
                "{} has a containment parent",
                self.path_of(i)
            )));
        }
        if member {
            self.v[i as usize].flags &= !flag::NO_CONTAINMENT;
        } else {
            self.v[i as usize].flags |= flag::NO_CONTAINMENT;
        }
        Ok(())
    }

    /// Link two pools in another subsystem (e.g. `power`, `feeds`).
    pub fn add_edge(
        &mut self,
        source: VertexId,
        target: VertexId,
        subsystem: &str,
        relationship: &str,
    ) -> Result<(), ModelError> {
        let s = self.check(source)?;
        let t = self.check(target)?;
        let sub = self.syms.intern(subsystem);
        if sub == self.hierarchy {
            return Err(ModelError::Structure(format!(
                "containment edges are made with add_child, not add_edge ({} -> {})",
                self.path_of(s),
                self.path_of(t)
            )));
        }
        let rel = self.syms.intern(relationship);
        self.edges.push(Edge {
            src: s,
            dst: t,
            subsystem: sub,
            relationship: rel,
        });
        Ok(())
    }

    /// Extra-subsystem edges whose endpoints are both live.
    pub fn edges(&self) -> impl Iterator<Item = EdgeRef<'_>> + '_ {
        self.edges
            .iter()
            .filter(|e| self.is_live(e.src) && self.is_live(e.dst))
            .map(|e| EdgeRef {
                source: VertexId(e.src),
                target: VertexId(e.dst),
                subsystem: self.syms.resolve(e.subsystem),
                relationship: self.syms.resolve(e.relationship),
            })
    }

    /// Extra-subsystem neighbours of `v` (edges leaving `v`).
    pub fn out_edges(&self, v: VertexId) -> impl Iterator<Item = EdgeRef<'_>> + '_ {
        self.edges().filter(move |e| e.source == v)
    }

    /// Approximate heap bytes used by the graph (vertex arena, side
    /// tables, records).  See the benchmark for a measured figure.
    pub fn memory_bytes(&self) -> usize {
        use std::mem::size_of;
        let mut n = self.v.capacity() * size_of::<Vertex>();
        n += self.names.capacity() * size_of::<Box<str>>();
        n += self.names.iter().map(|s| s.len()).sum::<usize>();
        n += self.syms.heap_bytes();
        n += self.roots.capacity() * 4;
        n += self.edges.capacity() * size_of::<Edge>();
        n += self.recs.capacity() * size_of::<Records>();
        n += self.recs.iter().map(Records::heap_bytes).sum::<usize>();
        n += self.aggs.capacity() * size_of::<Vec<(Sym, u64)>>();
        n += self.aggs.iter().map(|a| a.capacity() * 16).sum::<usize>();
        let side = |len: usize| len * 48;
        n += side(self.props.len() + self.tags.len() + self.paths.len());
        n += side(self.path_override.len() + self.uuids.len() + self.extra.len());
        n += self.jobs.len() * 64;
        n += self
            .jobs
            .values()
            .map(|j| j.vertices.capacity() * 4)
            .sum::<usize>();
        n
    }
}

/// RFC 4 default-name test without allocating: is `s` == basename + id
/// (or just basename when the id is unassigned)?
pub(crate) fn default_name_eq(basename: &str, id: i64, s: &str) -> bool {
    let Some(rest) = s.strip_prefix(basename) else {
        return false;
    };
    if id == -1 {
        return rest.is_empty();
    }
    let mut buf = [0; 20];
    let digits = idset::decimal(id.unsigned_abs(), &mut buf);
    let unsigned = if id < 0 {
        rest.strip_prefix('-')
    } else {
        Some(rest)
    };
    unsigned.is_some_and(|r| r.as_bytes() == digits)
}

/// Iterator along one link of the pools: children (`next`) or strict
/// ancestors (`parent`, nearest first).
pub struct Links<'a> {
    g: &'a Graph,
    cur: u32,
    link: fn(&Vertex) -> u32,
}

impl Iterator for Links<'_> {
    type Item = VertexId;
    fn next(&mut self) -> Option<VertexId> {
        if self.cur == NONE {
            return None;
        }
        let c = self.cur;
        self.cur = (self.link)(&self.g.v[c as usize]);
        Some(VertexId(c))
    }
}

/// Read-only view of one pool's data.
#[derive(Clone, Copy)]
pub struct PoolRef<'a> {
    pub(crate) g: &'a Graph,
    pub(crate) i: u32,
}

impl fmt::Debug for PoolRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool")
            .field("vertex", &self.i)
            .field("path", &self.path())
            .field("type", &self.type_name())
            .field("size", &self.size())
            .finish()
    }
}

impl<'a> PoolRef<'a> {
    fn x(&self) -> &'a Vertex {
        &self.g.v[self.i as usize]
    }
    pub fn vertex(&self) -> VertexId {
        VertexId(self.i)
    }
    pub fn type_sym(&self) -> Sym {
        self.x().ty
    }
    pub fn type_name(&self) -> &'a str {
        self.g.syms.resolve(self.x().ty)
    }
    pub fn basename(&self) -> &'a str {
        self.g.syms.resolve(self.x().basename)
    }
    /// The name (RFC 4 default: basename + id, or basename without id).
    pub fn name(&self) -> Cow<'a, str> {
        self.g.name_of(self.i)
    }
    /// Does the pool carry a name that differs from its default?
    pub fn has_custom_name(&self) -> bool {
        self.x().name != NONE
    }
    /// Numeric id, or None when unassigned.
    pub fn id(&self) -> Option<i64> {
        let id = self.x().id;
        (id != -1).then_some(id)
    }
    /// Numeric id as stored (-1 when unassigned).
    pub fn raw_id(&self) -> i64 {
        self.x().id
    }
    /// Execution target (broker rank), None when unset.
    pub fn rank(&self) -> Option<i64> {
        let r = self.x().rank;
        (r != -1).then_some(r)
    }
    pub fn raw_rank(&self) -> i64 {
        self.x().rank
    }
    pub fn uniq_id(&self) -> i64 {
        self.x().uniq
    }
    /// RFC 4 UUID: an explicit string if one was given, else the uniq id.
    pub fn uuid(&self) -> Cow<'a, str> {
        match self.g.uuids.get(&self.i) {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(self.x().uniq.to_string()),
        }
    }
    pub fn size(&self) -> u64 {
        self.x().size
    }
    pub fn unit(&self) -> &'a str {
        self.g.syms.resolve(self.x().unit)
    }
    pub fn state(&self) -> State {
        self.x().state
    }
    pub fn staged(&self) -> bool {
        self.x().flags & flag::STAGED != 0
    }
    /// Fluxion's `exclusive: true` JGF marker, if the pool was read with it.
    pub fn exclusive_marker(&self) -> bool {
        self.x().flags & flag::XMARK != 0
    }
    /// Does the pool belong to the containment hierarchy?
    pub fn in_containment(&self) -> bool {
        self.x().flags & flag::NO_CONTAINMENT == 0
    }
    pub fn path(&self) -> String {
        self.g.path_of(self.i)
    }
    pub fn uri(&self) -> String {
        format!("{}:{}", self.g.hierarchy(), self.path())
    }
    pub fn parent(&self) -> Option<VertexId> {
        let p = self.x().parent;
        (p != NONE).then_some(VertexId(p))
    }
    pub fn children(&self) -> Links<'a> {
        self.g.kids(self.i)
    }
    pub fn has_children(&self) -> bool {
        self.x().first != NONE
    }
    /// Static properties in insertion order.
    pub fn properties(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.keyed(&self.g.props).map(|(k, v)| (k, &**v))
    }
    pub fn property(&self, key: &str) -> Option<&'a str> {
        self.lookup(&self.g.props, flag::HAS_PROPS, key)
            .map(|v| &**v)
    }
    /// Tags in insertion order.
    pub fn tags(&self) -> impl Iterator<Item = (&'a str, Option<&'a str>)> + 'a {
        self.keyed(&self.g.tags).map(|(k, v)| (k, v.as_deref()))
    }
    /// `Some(value)` if tagged with `key` (the value itself is optional).
    pub fn tag(&self, key: &str) -> Option<Option<&'a str>> {
        self.lookup(&self.g.tags, flag::HAS_TAGS, key)
            .map(|v| v.as_deref())
    }
    /// Paths in subsystems other than the containment hierarchy.
    pub fn subsystem_paths(&self) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.keyed(&self.g.paths).map(|(k, v)| (k, &**v))
    }
    /// This pool's list of `map` (properties, tags or paths), keys resolved.
    fn keyed<V>(&self, map: &'a Keyed<V>) -> impl Iterator<Item = (&'a str, &'a V)> + 'a {
        let g = self.g;
        let list = map.get(&self.i).into_iter().flatten();
        list.map(move |(k, v)| (g.syms.resolve(*k), v))
    }
    /// The value of `key` in this pool's list of `map`, when flag `has` says
    /// there is a list.
    fn lookup<V>(&self, map: &'a Keyed<V>, has: u16, key: &str) -> Option<&'a V> {
        if self.x().flags & has == 0 {
            return None;
        }
        let k = self.g.syms.get(key)?;
        map.get(&self.i)?
            .iter()
            .find(|(kk, _)| *kk == k)
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Under `parent`: socket{0,1} > core{0..cores} per socket (ids
    /// socket * cores + core), on `rank` when given; returns the sockets.
    pub(crate) fn add_sockets(
        g: &mut Graph,
        parent: VertexId,
        cores: i64,
        rank: Option<i64>,
    ) -> Vec<VertexId> {
        let mut sockets = Vec::new();
        for s in 0..2 {
            let mut p = g.pool("socket").id(s);
            p.rank = rank;
            let sock = g.add_child(parent, p).unwrap();
            for c in 0..cores {
                let mut p = g.pool("core").id(s * cores + c);
                p.rank = rank;
                g.add_child(sock, p).unwrap();
            }
            sockets.push(sock);
        }
        sockets
    }

    /// A graph with only its root, cluster0.
    pub(crate) fn cluster() -> (Graph, VertexId) {
        let mut g = Graph::new();
        let p = g.pool("cluster").id(0);
        let root = g.add_root(p);
        (g, root)
    }

    fn small() -> (Graph, VertexId) {
        let (mut g, root) = cluster();
        for n in 0..2 {
            let p = g.pool("node").id(n).rank(n);
            let node = g.add_child(root, p).unwrap();
            add_sockets(&mut g, node, 4, Some(n));
        }
        (g, root)
    }

    #[test]
    fn default_names() {
        for (id, name, want) in [
            (3, "foo3", true),
            (-1, "foo", true),
            (-1, "foo-1", false),
            (-5, "foo-5", true),
            (5, "foo-5", false),
            (12, "foo012", false),
            (i64::MIN, "foo-9223372036854775808", true),
            (3, "bar3", false),
        ] {
            assert_eq!(default_name_eq("foo", id, name), want, "{id} {name}");
        }
    }

    #[test]
    fn defaults_for_basename_and_name() {
        let mut g = Graph::new();
        let p = g.pool("node").id(3);
        let a = g.add_root(p);
        let p = g.pool("rack");
        let b = g.add_root(p);
        let host = g.intern("quartz");
        let p = g.pool("node").basename(host).id(17);
        let c = g.add_root(p);
        let p = g.pool("node").name("login-a").id(4);
        let d = g.add_root(p);
        let a = g.get(a).unwrap();
        assert_eq!(a.basename(), "node");
        assert_eq!(a.name(), "node3");
        assert!(!a.has_custom_name());
        let b = g.get(b).unwrap();
        assert_eq!(b.name(), "rack");
        assert_eq!(b.id(), None);
        assert_eq!(g.get(c).unwrap().name(), "quartz17");
        let d = g.get(d).unwrap();
        assert_eq!(d.name(), "login-a");
        assert!(d.has_custom_name());
        assert_eq!(d.id(), Some(4));
    }

    #[test]
    fn default_name_not_stored() {
        let mut g = Graph::new();
        let p = g.pool("core").id(12).name("core12");
        let v = g.add_root(p);
        assert!(!g.get(v).unwrap().has_custom_name());
        assert!(g.names.is_empty());
        assert!(default_name_eq("core", 12, "core12"));
        assert!(!default_name_eq("core", 12, "core1"));
        assert!(!default_name_eq("core", 1, "core12"));
        assert!(default_name_eq("rack", -1, "rack"));
        assert!(!default_name_eq("rack", -1, "rack-1"));
        assert!(default_name_eq("x", -5, "x-5"));
    }

    #[test]
    fn paths_uris_and_lookup() {
        let (g, root) = small();
        assert_eq!(g.len(), 1 + 2 + 4 + 16);
        let n1 = g.children(root).nth(1).unwrap();
        let s0 = g.children(n1).next().unwrap();
        let c3 = g.children(s0).nth(3).unwrap();
        assert_eq!(g.path(c3).unwrap(), "/cluster0/node1/socket0/core3");
        assert_eq!(
            g.uri(c3).unwrap(),
            "containment:/cluster0/node1/socket0/core3"
        );
        assert_eq!(g.lookup("/cluster0/node1/socket0/core3"), Some(c3));
        assert_eq!(
            g.lookup("containment:/cluster0/node1/socket0/core3"),
            Some(c3)
        );
        assert_eq!(g.lookup("/cluster0"), Some(root));
        assert_eq!(g.lookup("power:/cluster0"), None);
        assert_eq!(g.lookup("/cluster0/node9"), None);
        assert_eq!(g.lookup("cluster0"), None);
        assert_eq!(g.parent(c3), Some(s0));
        assert_eq!(g.ancestors(c3).collect::<Vec<_>>(), vec![s0, n1, root]);
        assert_eq!(g.depth(c3), Some(3));
        assert!(g.is_ancestor(root, c3));
        assert!(!g.is_ancestor(c3, root));
    }

    #[test]
    fn hierarchy_name_is_uri_scheme() {
        let (mut g, root) = small();
        g.set_hierarchy("default");
        assert_eq!(g.uri(root).unwrap(), "default:/cluster0");
        assert_eq!(g.lookup("default:/cluster0"), Some(root));
        assert_eq!(g.lookup("containment:/cluster0"), None);
    }

    #[test]
    fn properties_tags_state_staged() {
        let (mut g, root) = small();
        let n0 = g.children(root).next().unwrap();
        g.set_property(n0, "amd-mi50@gpu", "").unwrap();
        g.set_property(n0, "perf_class", "3").unwrap();
        g.set_property(n0, "perf_class", "4").unwrap();
        let p = g.get(n0).unwrap();
        assert_eq!(
            p.properties().collect::<Vec<_>>(),
            vec![("amd-mi50@gpu", ""), ("perf_class", "4")]
        );
        assert_eq!(p.property("perf_class"), Some("4"));
        assert_eq!(p.property("nope"), None);
        assert!(g.remove_property(n0, "perf_class").unwrap());
        assert!(!g.remove_property(n0, "perf_class").unwrap());
        g.tag(n0, "maint", None).unwrap();
        g.tag(n0, "owner", Some("ops")).unwrap();
        let p = g.get(n0).unwrap();
        assert_eq!(p.tag("maint"), Some(None));
        assert_eq!(p.tag("owner"), Some(Some("ops")));
        assert_eq!(p.tag("x"), None);
        assert!(g.untag(n0, "maint").unwrap());
        assert_eq!(g.get(n0).unwrap().tag("maint"), None);
        g.set_state(n0, State::Down).unwrap();
        assert_eq!(g.get(n0).unwrap().state(), State::Down);
        g.stage(n0).unwrap();
        assert!(g.get(n0).unwrap().staged());
        g.unstage_all();
        assert!(!g.get(n0).unwrap().staged());
        assert_eq!(
            g.set_state(VertexId(9999), State::Up),
            Err(ModelError::NoVertex(9999))
        );
    }

    #[test]
    fn subsystem_edges_and_paths() {
        let (mut g, root) = small();
        let p = g.pool("powerpanel").id(0);
        let panel = g.add_root(p);
        g.set_containment_member(panel, false).unwrap();
        g.set_subsystem_path(panel, "power", "/powerpanel0")
            .unwrap();
        let n0 = g.children(root).next().unwrap();
        g.set_subsystem_path(n0, "power", "/powerpanel0/node0")
            .unwrap();
        g.add_edge(panel, n0, "power", "supplies-to").unwrap();
        let e: Vec<_> = g.edges().collect();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].source, panel);
        assert_eq!(e[0].target, n0);
        assert_eq!(e[0].subsystem, "power");
        assert_eq!(e[0].relationship, "supplies-to");
        assert_eq!(
            g.get(n0).unwrap().subsystem_paths().collect::<Vec<_>>(),
            vec![("power", "/powerpanel0/node0")]
        );
        // Not reachable through containment lookups.
        assert_eq!(g.lookup("/powerpanel0"), None);
        assert!(g.add_edge(panel, n0, "containment", "contains").is_err());
        assert!(g.set_containment_member(n0, false).is_err());
    }

    #[test]
    fn vertex_is_compact() {
        assert!(std::mem::size_of::<Vertex>() <= 80);
    }

    #[test]
    fn vertex_id_index_round_trip() {
        assert_eq!(VertexId::from_index(5), Some(VertexId(5)));
        assert_eq!(VertexId::from_index(u32::MAX as usize), None);
        assert_eq!(VertexId(7).index(), 7);
        assert_eq!(VertexId(7).to_string(), "7");
    }
}
