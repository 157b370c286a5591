//! The ordered list of nodes with a rank index (flux's `zlistx` of rnodes
//! plus its rank hash).
//!
//! List order matters: the short form (`dumps`) groups nodes in list order,
//! and flux moves nodes to the end of the list in some operations.  Removal
//! leaves a tombstone so it is O(1); tombstones are compacted lazily.

use crate::node::Node;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A multiplicative hasher for `u32` rank keys.
#[derive(Default)]
pub(crate) struct RankHasher(u64);

impl Hasher for RankHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = (u64::from(i) ^ 0x5555_5555).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

pub(crate) type RankMap<V> = HashMap<u32, V, BuildHasherDefault<RankHasher>>;

/// A map keyed by already well-mixed or small integers.
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<RankHasher>>;

#[derive(Clone, Debug, Default)]
pub(crate) struct NodeList {
    slots: Vec<Option<Node>>,
    index: RankMap<usize>,
    live: usize,
}

impl NodeList {
    pub(crate) fn reserve(&mut self, n: usize) {
        self.slots.reserve(n);
        self.index.reserve(n);
    }

    /// True if no rank occurs twice.
    pub(crate) fn unique_ranks(&self) -> bool {
        self.index.len() == self.live
    }

    pub(crate) fn len(&self) -> usize {
        self.live
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub(crate) fn get(&self, rank: u32) -> Option<&Node> {
        let &slot = self.index.get(&rank)?;
        self.slots.get(slot)?.as_ref()
    }

    pub(crate) fn get_mut(&mut self, rank: u32) -> Option<&mut Node> {
        let &slot = self.index.get(&rank)?;
        self.slots.get_mut(slot)?.as_mut()
    }

    /// Append a node whose rank is not yet present (`rlist_add_rnode_new`).
    pub(crate) fn push_new(&mut self, node: Node) {
        let slot = self.slots.len();
        self.index.entry(node.rank).or_insert(slot);
        self.slots.push(Some(node));
        self.live += 1;
    }

    /// Remove a node, keeping the order of the others.
    pub(crate) fn remove(&mut self, rank: u32) -> Option<Node> {
        let slot = self.index.remove(&rank)?;
        let node = self.slots.get_mut(slot)?.take();
        if node.is_some() {
            self.live -= 1;
        }
        if self.slots.len() > 64 && self.live < self.slots.len() / 2 {
            self.compact();
        }
        node
    }

    /// Drop tombstones and rebuild the index.
    pub(crate) fn compact(&mut self) {
        if self.live == self.slots.len() {
            return;
        }
        self.slots.retain(Option::is_some);
        self.reindex();
    }

    /// Rebuild the rank index from the slots (first slot wins for a rank
    /// that occurs twice, which only a degenerate rerank can produce).
    pub(crate) fn reindex(&mut self) {
        self.index.clear();
        for (i, n) in self.slots.iter().enumerate() {
            if let Some(n) = n {
                self.index.entry(n.rank).or_insert(i);
            }
        }
        self.live = self.slots.iter().filter(|s| s.is_some()).count();
    }

    /// Nodes in list order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Node> + '_ {
        self.slots.iter().filter_map(Option::as_ref)
    }

    /// Mutable nodes in list order.  Callers must not change ranks without
    /// calling [`NodeList::reindex`].
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut Node> + '_ {
        self.slots.iter_mut().filter_map(Option::as_mut)
    }

    /// Sort the list by rank (stable), as `zlistx_sort` with `by_rank`.
    pub(crate) fn sort_by_rank(&mut self) {
        self.slots.retain(Option::is_some);
        self.slots.sort_by_key(|n| n.as_ref().map_or(0, |n| n.rank));
        self.reindex();
    }

    /// True if the live nodes are in ascending rank order.
    pub(crate) fn is_sorted(&self) -> bool {
        let mut prev: Option<u32> = None;
        for n in self.iter() {
            if prev.is_some_and(|p| p > n.rank) {
                return false;
            }
            prev = Some(n.rank);
        }
        true
    }

    /// Keep only nodes for which `f` is true; returns how many were removed.
    pub(crate) fn retain(&mut self, mut f: impl FnMut(&Node) -> bool) -> usize {
        let before = self.live;
        for s in self.slots.iter_mut() {
            if s.as_ref().is_some_and(|n| !f(n)) {
                *s = None;
            }
        }
        self.slots.retain(Option::is_some);
        self.reindex();
        before - self.live
    }
}
