//! One execution target (broker rank): flux-core's `rnode`.

use crate::error::RError;
use crate::zhash::{core_name, gpu_name, Name, ZTable};
use idset::{Format, IdSet};
use std::sync::Arc;

/// Shared empty idset (most nodes start with an empty `core` child).
fn empty_ids() -> Arc<IdSet> {
    static EMPTY: std::sync::OnceLock<Arc<IdSet>> = std::sync::OnceLock::new();
    EMPTY.get_or_init(|| Arc::new(IdSet::new())).clone()
}

/// Memoized idset operations keyed by the identity of shared idsets.
///
/// Nodes built from the same R_lite entry share their child idsets, so
/// set operations over many nodes repeat the same few computations; this
/// cache returns the shared result instead of allocating a new set per
/// node.  Its size is bounded.
#[derive(Default)]
pub(crate) struct SetCache {
    map: crate::nodelist::FastMap<CacheKey, CacheEntry>,
}

/// (left operand, right operand, is-difference)
type CacheKey = (usize, usize, bool);
/// The operands (kept alive so their addresses stay unique) and result.
type CacheEntry = (Arc<IdSet>, Arc<IdSet>, Arc<IdSet>);

impl SetCache {
    const LIMIT: usize = 4096;

    fn op(&mut self, a: &Arc<IdSet>, b: &Arc<IdSet>, diff: bool) -> Arc<IdSet> {
        let key = (Arc::as_ptr(a) as usize, Arc::as_ptr(b) as usize, diff);
        if let Some((_, _, r)) = self.map.get(&key) {
            return r.clone();
        }
        let r = if diff {
            if a.intersects(b) {
                Arc::new(a.difference(b))
            } else {
                a.clone()
            }
        } else {
            Arc::new(a.intersection(b))
        };
        if self.map.len() >= Self::LIMIT {
            self.map.clear();
        }
        self.map.insert(key, (a.clone(), b.clone(), r.clone()));
        r
    }

    /// `a - b`.
    pub(crate) fn difference(&mut self, a: &Arc<IdSet>, b: &Arc<IdSet>) -> Arc<IdSet> {
        self.op(a, b, true)
    }

    /// `a ∩ b`.
    pub(crate) fn intersection(&mut self, a: &Arc<IdSet>, b: &Arc<IdSet>) -> Arc<IdSet> {
        self.op(a, b, false)
    }
}

/// Children flux ignores when verifying (bit mask, as `RNODE_IGNORE_*`).
pub(crate) const IGNORE_CORE: u8 = 1;
pub(crate) const IGNORE_GPU: u8 = 2;

/// Why a child could not be added: its ids overlap existing ones (EEXIST).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Overlap {
    pub name: String,
    /// The ids given twice (an idset string).
    pub ids: String,
}

impl Overlap {
    /// The error: these ids given twice for `rank`.
    pub(crate) fn at(self, rank: u32) -> RError {
        RError::Overlap {
            rank,
            name: self.name,
            ids: self.ids,
        }
    }
}

/// A resource node.  Children are idsets keyed by type name; `core` is
/// always present (possibly empty).  Properties are a set of names.  Both
/// live in [`ZTable`]s so that iteration order matches flux-core's.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub rank: u32,
    pub hostname: Option<Arc<str>>,
    pub children: ZTable<Arc<IdSet>>,
    pub props: ZTable<()>,
}

/// Remembered results of [`Node::copy`]'s table operations, per table
/// state: they depend only on the keys and the table's layout, never on
/// the values, so a copy of a table in a known state is the remembered
/// layout filled with the table's values.
#[derive(Default)]
pub(crate) struct CopyMemo {
    children: TableMemo,
    props: TableMemo,
}

#[derive(Default)]
struct TableMemo {
    /// (table state, times, the state after the operations with slots of
    /// the original as values)
    seen: Vec<(ZTable<u32>, u8, ZTable<u32>)>,
    last: usize,
}

/// Distinct table states remembered.
const COPY_MEMO_MAX: usize = 64;

impl TableMemo {
    fn apply<V: Clone>(
        &mut self,
        t: &ZTable<V>,
        op: impl Fn(&ZTable<u32>) -> ZTable<u32>,
        times: u8,
    ) -> ZTable<V> {
        let hit = |(s, n, _): &(ZTable<u32>, u8, ZTable<u32>)| *n == times && s.same_shape(t);
        let found = match self.seen.get(self.last) {
            Some(e) if hit(e) => Some(self.last),
            _ => self.seen.iter().position(hit),
        };
        let i = match found {
            Some(i) => i,
            None => {
                let start = t.slots();
                let mut end = op(&start);
                for _ in 1..times {
                    end = op(&end);
                }
                if self.seen.len() >= COPY_MEMO_MAX {
                    return ZTable::fill_from(&end, t).unwrap_or_else(|| op_direct(t, &op, times));
                }
                self.seen.push((start, times, end));
                self.seen.len() - 1
            }
        };
        self.last = i;
        match self
            .seen
            .get(i)
            .and_then(|(_, _, end)| ZTable::fill_from(end, t))
        {
            Some(r) => r,
            None => op_direct(t, &op, times),
        }
    }
}

/// The operations applied to `t` itself (never reached: slots are always
/// in range).
fn op_direct<V: Clone>(
    t: &ZTable<V>,
    op: &impl Fn(&ZTable<u32>) -> ZTable<u32>,
    times: u8,
) -> ZTable<V> {
    let mut end = op(&t.slots());
    for _ in 1..times {
        end = op(&end);
    }
    ZTable::fill_from(&end, t).unwrap_or_default()
}

/// `util_idset_add_check`: union that fails if the sets intersect, except
/// that anything may be added to an empty set.
fn add_check(a: &Arc<IdSet>, b: &Arc<IdSet>) -> Option<Arc<IdSet>> {
    if a.is_empty() {
        return Some(b.clone());
    }
    if a.intersects(b) {
        return None;
    }
    if b.is_empty() {
        return Some(a.clone());
    }
    Some(Arc::new(a.union(b)))
}

impl Node {
    /// `rnode_new`: no resources but an empty `core` child.
    pub(crate) fn new(hostname: Option<Arc<str>>, rank: u32) -> Node {
        let mut children = ZTable::with_capacity(2);
        children.insert(core_name().clone(), empty_ids());
        Node {
            rank,
            hostname,
            children,
            props: ZTable::new(),
        }
    }

    /// `rnode_add_child_idset` (with avail == ids): add a new child or add
    /// ids to an existing one; overlapping ids fail.
    pub(crate) fn add_child(&mut self, name: &Name, ids: &Arc<IdSet>) -> Result<(), Overlap> {
        if let Some(cur) = self.children.lookup(name) {
            match add_check(cur, ids) {
                Some(new) => {
                    *cur = new;
                    Ok(())
                }
                None => Err(Overlap {
                    name: name.as_str().to_string(),
                    ids: cur.intersection(ids).encode(),
                }),
            }
        } else {
            self.children.insert(name.clone(), ids.clone());
            Ok(())
        }
    }

    /// `rnode_copy`: duplicate children and properties (the duplicated
    /// tables get flux's re-insertion order), then look up `core`.
    pub(crate) fn copy(&self) -> Node {
        Node {
            rank: self.rank,
            hostname: self.hostname.clone(),
            children: dup_children(&self.children),
            props: self.props.dup(),
        }
    }

    /// `copy()` applied `times` times, with the table operations
    /// remembered per table state in `memo`.
    pub(crate) fn copy_memo(&self, times: u8, memo: &mut CopyMemo) -> Node {
        Node {
            rank: self.rank,
            hostname: self.hostname.clone(),
            children: memo.children.apply(&self.children, dup_children, times),
            props: memo.props.apply(&self.props, ZTable::dup, times),
        }
    }

    /// `copy()` with `props` as the copy's property table.
    pub(crate) fn copy_with_props(&self, props: ZTable<()>, memo: &mut CopyMemo) -> Node {
        Node {
            rank: self.rank,
            hostname: self.hostname.clone(),
            children: memo.children.apply(&self.children, dup_children, 1),
            props,
        }
    }

    /// The `core` idset (flux keeps a direct pointer; no lookup).
    pub(crate) fn cores(&self) -> &IdSet {
        match self.children.peek_name(core_name()) {
            Some(c) => c,
            None => empty_static(),
        }
    }

    pub(crate) fn core_count(&self) -> u64 {
        self.cores().len()
    }

    /// `rnode_empty`: no ids in any child.
    pub(crate) fn is_empty(&self) -> bool {
        self.children.values_unordered().all(|(_, v)| v.is_empty())
    }

    /// `rnode_avail_total`: ids in all children.
    pub(crate) fn total(&self) -> u64 {
        self.children.values_unordered().map(|(_, v)| v.len()).sum()
    }

    /// `rnode_count_type` without table side effects.
    pub(crate) fn count_type(&self, ty: &str) -> u64 {
        self.children.peek(ty).map_or(0, |c| c.len())
    }

    /// `rnode_set_property`.
    pub(crate) fn set_property(&mut self, name: &Name) {
        self.props.insert(name.clone(), ());
    }

    /// `rnode_add`: merge `other`'s children (in its table order) and
    /// properties into `self`.  On overlap, children merged so far stay.
    pub(crate) fn merge(&mut self, other: &Node) -> Result<(), Overlap> {
        for (name, ids) in other.children.iter() {
            self.add_child(name, ids)?;
        }
        for (name, _) in other.props.iter() {
            self.set_property(name);
        }
        Ok(())
    }

    /// `rnode_diff_ex`: a copy of `self` minus `b`'s ids; non-core children
    /// left empty are removed; children named in `ignore` are cleared.
    pub(crate) fn diff_ex(&self, b: &Node, ignore: u8) -> Node {
        self.diff_cached(b, ignore, &mut SetCache::default())
    }

    /// [`Node::diff_ex`] with a shared [`SetCache`].
    pub(crate) fn diff_cached(&self, b: &Node, ignore: u8, cache: &mut SetCache) -> Node {
        let mut n = self.copy();
        for (name, bids) in b.children.iter() {
            let Some(cur) = n.children.lookup(name) else {
                continue;
            };
            if Arc::ptr_eq(cur, bids) || **cur == **bids {
                *cur = empty_ids();
            } else {
                *cur = cache.difference(cur, bids);
            }
            let now_empty = cur.is_empty();
            if !name.is(core_name().as_str()) && now_empty {
                n.children.delete(name);
            }
        }
        if ignore != 0 {
            for (name, ids) in n.children.values_mut() {
                let ign = (ignore & IGNORE_CORE != 0 && name.is("core"))
                    || (ignore & IGNORE_GPU != 0 && name.is("gpu"));
                if ign {
                    *ids = empty_ids();
                }
            }
        }
        n
    }

    /// True if [`Node::diff_cached`] of `self` and `b` leaves no ids
    /// (looked at without copying or touching any table).
    pub(crate) fn diff_is_empty(&self, b: &Node) -> bool {
        self.children.values_unordered().all(|(name, ids)| {
            ids.is_empty()
                || b.children
                    .peek_name(name)
                    .is_some_and(|bids| Arc::ptr_eq(ids, bids) || ids.is_subset(bids))
        })
    }

    /// `rnode_intersect`: children present in both with a non-empty
    /// intersection, built on a fresh node in `self`'s child order.  The
    /// lookups into `b` follow flux (they may reorder `b`'s table).
    pub(crate) fn intersect(&self, b: &mut Node, cache: &mut SetCache) -> Option<Node> {
        let children = &mut b.children;
        self.intersect_by(b.rank, &b.hostname, cache, |name| {
            children.lookup(name).cloned()
        })
    }

    /// Like [`Node::intersect`] without touching `b`'s table shape.
    pub(crate) fn intersect_ro(&self, b: &Node, cache: &mut SetCache) -> Option<Node> {
        self.intersect_by(b.rank, &b.hostname, cache, |name| {
            b.children.peek_name(name).cloned()
        })
    }

    /// The intersection with the node `rank`/`hostname` whose children's
    /// ids `lookup` finds by name.
    fn intersect_by(
        &self,
        rank: u32,
        hostname: &Option<Arc<str>>,
        cache: &mut SetCache,
        mut lookup: impl FnMut(&Name) -> Option<Arc<IdSet>>,
    ) -> Option<Node> {
        if self.rank != rank || !hostnames_match(&self.hostname, hostname) {
            return None;
        }
        let mut result = Node::new(self.hostname.clone(), self.rank);
        for (name, aids) in self.children.iter() {
            if let Some(bids) = lookup(name) {
                let x = cache.intersection(aids, &bids);
                if !x.is_empty() {
                    let _ = result.add_child(name, &x);
                }
            }
        }
        Some(result)
    }

    /// `rnode_remap`: renumber each child's ids to `0..count-1`, except
    /// `gpu` (flux's no-remap set).
    pub(crate) fn remap(&mut self) {
        for (name, ids) in self.children.values_mut() {
            if name.is(gpu_name().as_str()) {
                continue;
            }
            let count = ids.len();
            if count == 0 {
                continue;
            }
            if ids.first() == Some(0) && ids.last().map(u64::from) == Some(count - 1) {
                continue;
            }
            // count <= 2^31, so count - 1 fits in u32.
            *ids = Arc::new(IdSet::from_range(0, (count - 1) as u32));
        }
    }

    /// `rnode_child_dumps`: `core` first, then other children sorted by
    /// name; empty children skipped; `name` + bracketed idset, comma
    /// separated.
    pub(crate) fn child_dumps(&self, out: &mut String) {
        let mut names: Vec<(&Name, &Arc<IdSet>)> = self.children.values_unordered().collect();
        names.sort_by(|a, b| {
            let (x, y) = (a.0.as_str(), b.0.as_str());
            match (x == "core", y == "core") {
                (true, false) => std::cmp::Ordering::Less,
                (false, true) => std::cmp::Ordering::Greater,
                _ => x.as_bytes().cmp(y.as_bytes()),
            }
        });
        let mut first = true;
        for (name, ids) in names {
            if ids.is_empty() {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            out.push_str(name.as_str());
            out.push_str(&ids.encode_with(Format::BRACKETED));
        }
    }

    /// Does the node carry property `name`?  (No table side effects.)
    pub(crate) fn has_property(&self, name: &str) -> bool {
        self.props.peek(name).is_some()
    }

    /// A cheap hash of the node's shape (child names and idsets), equal
    /// for nodes that flux's `rnode_cmp` considers identical.
    pub(crate) fn shape_hash(&self) -> u64 {
        const K: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut acc: u64 = self.children.len() as u64;
        for (name, ids) in self.children.values_unordered() {
            let mut h = name.hash().wrapping_mul(K);
            for &(lo, hi) in ids.ranges() {
                h = (h.rotate_left(5) ^ (u64::from(lo) << 32 | u64::from(hi))).wrapping_mul(K);
            }
            acc = acc.wrapping_add(h);
        }
        acc
    }

    /// `rnode_cmp(self, other) == 0` (ignoring table side effects).
    pub(crate) fn same_shape(&self, other: &Node) -> bool {
        if self.children.len() != other.children.len() {
            return false;
        }
        self.children.values_unordered().all(|(name, ids)| {
            other
                .children
                .peek_name(name)
                .is_some_and(|o| Arc::ptr_eq(o, ids) || **o == **ids)
        })
    }
}

/// `rnode_hostname_cmp == 0`: a missing hostname matches anything.
/// `copy()`'s child table: duplicated (flux's re-insertion order), then
/// `core` looked up.
fn dup_children<V: Clone>(t: &ZTable<V>) -> ZTable<V> {
    let mut t = t.dup();
    let _ = t.lookup(core_name());
    t
}

pub(crate) fn hostnames_match(a: &Option<Arc<str>>, b: &Option<Arc<str>>) -> bool {
    match (a, b) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    }
}

fn empty_static() -> &'static IdSet {
    static EMPTY: IdSet = IdSet::new();
    &EMPTY
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &str) -> Arc<IdSet> {
        Arc::new(IdSet::parse(s).unwrap_or_default())
    }

    fn node(rank: u32, core: &str, gpu: Option<&str>) -> Node {
        let mut n = Node::new(None, rank);
        let _ = n.add_child(core_name(), &ids(core));
        if let Some(g) = gpu {
            let _ = n.add_child(gpu_name(), &ids(g));
        }
        n
    }

    fn dumps(n: &Node) -> String {
        let mut s = String::new();
        n.child_dumps(&mut s);
        s
    }

    #[test]
    fn add_child_checks_overlap() {
        let mut n = node(0, "0-3", None);
        assert!(n.add_child(core_name(), &ids("4-7")).is_ok());
        assert_eq!(dumps(&n), "core[0-7]");
        assert!(n.add_child(core_name(), &ids("7")).is_err());
        assert!(n.add_child(core_name(), &ids("")).is_ok());
    }

    #[test]
    fn diff_removes_empty_non_core_children() {
        let a = node(0, "0-3", Some("0"));
        let b = node(0, "0-3", None);
        let d = a.diff_ex(&b, 0);
        assert_eq!(dumps(&d), "gpu0");
        let d = a.diff_ex(&a, 0);
        assert!(d.is_empty());
        assert_eq!(d.children.len(), 1);
        let c = node(0, "0-1", None);
        assert_eq!(dumps(&a.diff_ex(&c, 0)), "core[2-3],gpu0");
        assert_eq!(dumps(&a.diff_ex(&c, IGNORE_GPU)), "core[2-3]");
    }

    #[test]
    fn remap_keeps_gpu_ids() {
        let mut n = node(0, "1,5,7,9", Some("1,3"));
        n.remap();
        assert_eq!(dumps(&n), "core[0-3],gpu[1,3]");
    }

    #[test]
    fn intersect_requires_same_rank_and_host() {
        let a = node(1, "0-3", Some("0-1"));
        let mut b = node(1, "2-5", Some("1"));
        let mut cache = SetCache::default();
        let x = a
            .intersect(&mut b, &mut cache)
            .map(|n| dumps(&n))
            .unwrap_or_default();
        assert_eq!(x, "core[2-3],gpu1");
        let mut c = node(2, "0-3", None);
        assert!(a.intersect(&mut c, &mut cache).is_none());
        let mut h1 = node(1, "0", None);
        h1.hostname = Some("foo".into());
        let mut h2 = h1.clone();
        h2.hostname = Some("bar".into());
        assert!(h1.intersect(&mut h2, &mut cache).is_none());
    }

    #[test]
    fn child_dumps_orders_core_first() {
        let mut n = node(0, "0", Some("0-1"));
        let _ = n.add_child(&Name::new("aaa"), &ids("2"));
        assert_eq!(dumps(&n), "core0,aaa2,gpu[0-1]");
    }

    #[test]
    fn shape_equality_counts_empty_children() {
        let a = node(0, "0", Some(""));
        let b = node(1, "0", None);
        assert!(!a.same_shape(&b));
        let c = node(2, "0", Some(""));
        assert!(a.same_shape(&c));
        assert_eq!(a.shape_hash(), c.shape_hash());
    }
}
