//! The resource set type and its set operations (flux-core's `rlist`).

use crate::error::{RError, RerankError};
use crate::node::{CopyMemo, Node, SetCache};
use crate::nodelist::NodeList;
use crate::zhash::{core_name, gpu_name, Name};
use crate::MAX_NODES;
use hostlist::Hostlist;
use idset::IdSet;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// An RFC 20 resource set: execution targets (broker ranks) with optional
/// hostnames, child resources (`core`, `gpu`, any other name) as idsets,
/// and properties; plus `starttime`, `expiration`, `nslots` and the opaque
/// `scheduling` object.
///
/// The implementation follows flux-core's librlist closely, including the
/// order of nodes in its internal list (which decides the order of groups
/// in [`Rset::dumps`]) and the hash-table order of children and properties
/// (which decides key order in [`Rset::to_json`]).
#[derive(Clone, Debug, Default)]
pub struct Rset {
    pub(crate) nodes: NodeList,
    /// flux's `rl->avail`: a running tally of available cores, updated
    /// only when nodes are added (as flux does).  `flux R decode --count
    /// core` prints it.
    pub(crate) avail: i64,
    pub(crate) starttime: f64,
    pub(crate) expiration: f64,
    pub(crate) nslots: i32,
    pub(crate) scheduling: Option<Value>,
    /// RFC 20 `attributes`, kept verbatim from the parsed R but never
    /// encoded (flux-core's R tools drop it): [`Rset::attributes`].
    pub(crate) attributes: Option<Value>,
}

/// Per-rank view of a node, for inspection and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// The rank.
    pub rank: u32,
    /// The hostname, if known.
    pub hostname: Option<String>,
    /// Children by name (sorted by name), including empty ones.
    pub children: Vec<(String, IdSet)>,
    /// Properties (sorted).
    pub properties: Vec<String>,
}

impl PartialEq for Rset {
    /// Content equality: the same ranks with the same hostnames, children
    /// (as name → idset maps, empty children ignored) and property sets,
    /// and the same times, `nslots` and `scheduling`.  List order and
    /// internal hash-table order are not compared.
    fn eq(&self, other: &Rset) -> bool {
        fn norm(i: NodeInfo) -> NodeInfo {
            NodeInfo {
                children: i
                    .children
                    .into_iter()
                    .filter(|(_, s)| !s.is_empty())
                    .collect(),
                ..i
            }
        }
        self.nnodes() == other.nnodes()
            && self.starttime == other.starttime
            && self.expiration == other.expiration
            && self.nslots == other.nslots
            && self.scheduling == other.scheduling
            && self
                .node_infos()
                .into_iter()
                .map(norm)
                .eq(other.node_infos().into_iter().map(norm))
    }
}

impl Rset {
    /// An empty set.
    pub fn new() -> Rset {
        Rset::default()
    }

    // ------------------------------------------------------------------
    // Accessors

    /// Number of nodes (execution targets).
    pub fn nnodes(&self) -> usize {
        self.nodes.len()
    }

    /// True if the set has no nodes.
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Total ids of child type `ty` over all nodes (`rlist_count`).
    pub fn count(&self, ty: &str) -> u64 {
        self.nodes.iter().map(|n| n.count_type(ty)).sum()
    }

    /// flux's running "available cores" tally (`rl->avail`), which is what
    /// `flux R decode --count core` prints.  It only grows when nodes are
    /// added, so after `remove_ranks` or some unions it can differ from
    /// `count("core")`, exactly as in flux-core.
    pub fn core_avail(&self) -> i64 {
        self.avail
    }

    /// The ranks present.
    pub fn ranks(&self) -> IdSet {
        let mut v: Vec<u32> = self.nodes.iter().map(|n| n.rank).collect();
        v.sort_unstable();
        v.dedup();
        IdSet::from_sorted_ranges(v.into_iter().map(|r| (r, r))).unwrap_or_default()
    }

    /// Hostnames in rank order, or `None` if some node has no hostname
    /// (`rlist_nodelist`).
    pub fn nodelist(&self) -> Option<Hostlist> {
        let mut v: Vec<&Node> = self.nodes.iter().collect();
        v.sort_by_key(|n| n.rank);
        let mut names = Vec::with_capacity(v.len());
        for n in v {
            names.push(n.hostname.as_deref()?);
        }
        Some(names.into_iter().collect())
    }

    /// The hostname of `rank`, if the rank exists and has one.
    pub fn hostname(&self, rank: u32) -> Option<&str> {
        self.nodes.get(rank)?.hostname.as_deref()
    }

    /// Details of every node, in rank order.
    pub fn node_infos(&self) -> Vec<NodeInfo> {
        let mut v: Vec<NodeInfo> = self.nodes.iter().map(node_info).collect();
        v.sort_by_key(|i| i.rank);
        v
    }

    /// A node agent's R, which must describe one node (any rank): that
    /// node's `core` and `gpu` sets, empty where absent.  The error says
    /// what is wrong with it, for the refusal of the agent's hello.
    pub fn one_node(r: &Value, max_items: u64) -> Result<(IdSet, IdSet), String> {
        let parsed =
            Rset::from_json_limited(r, 64, max_items).map_err(|e| format!("invalid R: {e}"))?;
        let infos = parsed.node_infos();
        let [node] = infos.as_slice() else {
            return Err(format!(
                "R must describe exactly one node (it has {})",
                infos.len()
            ));
        };
        let child = |name: &str| {
            let found = node.children.iter().find(|(n, _)| n == name);
            found.map(|(_, ids)| ids.clone()).unwrap_or_default()
        };
        Ok((child("core"), child("gpu")))
    }

    /// Every node's rank, hostname and property names (in table order),
    /// in list order: the cheap part of [`Rset::node_infos`].
    pub fn node_properties(&self) -> Vec<(u32, Option<&str>, Vec<&str>)> {
        self.nodes
            .iter()
            .map(|n| {
                (
                    n.rank,
                    n.hostname.as_deref(),
                    n.props.iter().map(|(k, _)| k.as_str()).collect(),
                )
            })
            .collect()
    }

    /// Details of one node.
    pub fn node_info(&self, rank: u32) -> Option<NodeInfo> {
        self.nodes.get(rank).map(node_info)
    }

    /// `execution.starttime` (0.0 when unset).
    pub fn starttime(&self) -> f64 {
        self.starttime
    }

    /// `execution.expiration` (0.0 when unset).
    pub fn expiration(&self) -> f64 {
        self.expiration
    }

    /// Set `starttime` (values <= 0 mean unset).
    pub fn set_starttime(&mut self, t: f64) {
        self.starttime = if t > 0.0 { t } else { 0.0 };
    }

    /// Set `expiration` (values <= 0 mean unset).
    pub fn set_expiration(&mut self, t: f64) {
        self.expiration = if t > 0.0 { t } else { 0.0 };
    }

    /// `execution.nslots`, if set (> 0).
    pub fn nslots(&self) -> Option<i32> {
        (self.nslots > 0).then_some(self.nslots)
    }

    /// Set `nslots` (values <= 0 mean unset).
    pub fn set_nslots(&mut self, n: i32) {
        self.nslots = n.max(0);
    }

    /// The opaque top-level `scheduling` value, kept verbatim.
    pub fn scheduling(&self) -> Option<&Value> {
        self.scheduling.as_ref()
    }

    /// The RFC 20 `attributes` of the R this set was parsed from,
    /// verbatim.  [`Rset::to_json`] does not write it (as flux-core's
    /// `rlist_to_R`); a service that stores a loaded R keeps it from here.
    pub fn attributes(&self) -> Option<&Value> {
        self.attributes.as_ref()
    }

    /// Replace the `scheduling` value.
    pub fn set_scheduling(&mut self, v: Option<Value>) {
        self.scheduling = v;
    }

    /// Sort the internal node list by rank, as flux-core does as a side
    /// effect of encoding or listing nodes.  Only [`Rset::dumps`] can
    /// observe the difference.
    pub fn sort_by_rank(&mut self) {
        self.nodes.sort_by_rank();
    }

    // ------------------------------------------------------------------
    // Building

    fn tally(&mut self, n: &Node) {
        self.avail += n.core_count() as i64;
    }

    /// `rlist_add_rnode`: append a new node or merge into the node with
    /// the same rank.
    pub(crate) fn add_node(&mut self, n: Node) -> Result<(), RError> {
        if let Some(found) = self.nodes.get_mut(n.rank) {
            found.merge(&n).map_err(|o| o.at(n.rank))?;
            self.avail += n.core_count() as i64;
            Ok(())
        } else {
            self.add_node_new(n)
        }
    }

    pub(crate) fn add_node_new(&mut self, n: Node) -> Result<(), RError> {
        if self.nodes.len() >= MAX_NODES {
            return Err(RError::TooManyNodes);
        }
        self.tally(&n);
        self.nodes.push_new(n);
        Ok(())
    }

    /// Add a node for `rank` with `cores` (an idset string), as
    /// `rlist_append_rank_cores`; merges with an existing rank.
    pub fn append_rank_cores(
        &mut self,
        hostname: Option<&str>,
        rank: u32,
        cores: &str,
    ) -> Result<(), RError> {
        let ids = IdSet::parse(cores).map_err(|_| RError::Child {
            rank,
            name: "core".into(),
            value: format!("\"{cores}\""),
        })?;
        let mut n = Node::new(hostname.map(Arc::from), rank);
        n.add_child(core_name(), &Arc::new(ids))
            .map_err(|o| o.at(rank))?;
        self.add_node(n)
    }

    /// Add child ids `ids` (an idset string) named `name` to existing
    /// `rank` (`rlist_rank_add_child`).
    pub fn rank_add_child(&mut self, rank: u32, name: &str, ids: &str) -> Result<(), RError> {
        let set = IdSet::parse(ids).map_err(|_| RError::Child {
            rank,
            name: name.into(),
            value: format!("\"{ids}\""),
        })?;
        let n = self
            .nodes
            .get_mut(rank)
            .ok_or_else(|| RError::msg(format!("rank {rank} not found")))?;
        n.add_child(&Name::new(name), &Arc::new(set))
            .map_err(|o| o.at(rank))
    }

    /// Add a node with given cores and gpus (both may be empty).  Used for
    /// discovered topologies: like `rlist_from_hwloc` followed by append.
    pub fn append_node(
        &mut self,
        hostname: Option<&str>,
        rank: u32,
        cores: &IdSet,
        gpus: &IdSet,
    ) -> Result<(), RError> {
        let mut n = Node::new(hostname.map(Arc::from), rank);
        n.add_child(core_name(), &Arc::new(cores.clone()))
            .map_err(|o| o.at(rank))?;
        n.add_child(gpu_name(), &Arc::new(gpus.clone()))
            .map_err(|o| o.at(rank))?;
        let mut single = Rset::new();
        single.add_node(n)?;
        self.append(&single)
    }

    // ------------------------------------------------------------------
    // Set operations

    /// Copy `other`'s nodes into `self` (`rlist_append`).  A rank present
    /// in both has its children merged; overlapping ids fail (EEXIST), as
    /// does a node without any resources.  `scheduling` is kept from
    /// `self` if set, else taken from `other`.
    pub fn append(&mut self, other: &Rset) -> Result<(), RError> {
        self.nodes.reserve(other.nodes.len());
        for n in other.nodes.iter() {
            if n.total() == 0 {
                return Err(RError::EmptyNode(n.rank));
            }
            self.add_node(n.copy())?;
        }
        if self.scheduling.is_none() {
            self.scheduling.clone_from(&other.scheduling);
        }
        Ok(())
    }

    /// Add `other` to `self` where overlap is allowed (`rlist_add`):
    /// append `other - self`.
    pub fn add(&mut self, other: &Rset) -> Result<(), RError> {
        let d = other.diff(self)?;
        self.append(&d)
    }

    /// `self - other` per rank (`rlist_diff`): ids of `other` are removed
    /// from the same rank; nodes left without any id vanish.  Fails if
    /// `self` holds a node without resources (flux cannot copy it).
    pub fn diff(&self, other: &Rset) -> Result<Rset, RError> {
        let mut rl = Rset::new();
        rl.append(self)?;
        rl.remove_diff(other);
        Ok(rl)
    }

    /// `copy_empty(self).diff(other)`, where `copy_empty` is flux's
    /// `rlist_copy_empty` (a node-by-node copy in list order, what
    /// [`Rset::copy_constraint`] with an empty constraint returns), without
    /// building the intermediate copy: each node is copied twice, as the
    /// two steps do, so tables come out the same.
    pub fn copy_diff(&self, other: &Rset) -> Result<Rset, RError> {
        let mut rl = Rset::new();
        rl.nodes.reserve(self.nodes.len());
        let mut memo = CopyMemo::default();
        // A node `other` removes entirely is not copied: it would vanish
        // in the diff (its cores still count in the `avail` tally).
        let skip = !other.is_empty() && self.nodes.unique_ranks() && other.nodes.unique_ranks();
        for n in self.nodes.iter() {
            if n.total() == 0 {
                return Err(RError::EmptyNode(n.rank));
            }
        }
        for n in self.nodes.iter() {
            if skip && other.nodes.get(n.rank).is_some_and(|b| n.diff_is_empty(b)) {
                rl.avail += n.core_count() as i64;
                continue;
            }
            rl.add_node(n.copy_memo(2, &mut memo))?;
        }
        if !self.is_empty() {
            rl.scheduling.clone_from(&self.scheduling);
        }
        rl.remove_diff(other);
        Ok(rl)
    }

    /// `self.copy_diff(other)?.copy_diff(&Rset::new())` (flux's
    /// `up - allocated` with nothing allocated) without building the
    /// intermediate set: nodes `other` does not touch are copied four
    /// times in one go, the others diffed as `copy_diff` does and then
    /// copied twice; list order, tables, `avail` and `scheduling` come out
    /// the same.
    pub fn copy_diff_copy(&self, other: &Rset) -> Result<Rset, RError> {
        if !self.nodes.unique_ranks() || !other.nodes.unique_ranks() {
            return self.copy_diff(other)?.copy_diff(&Rset::new());
        }
        self.check_copyable()?;
        let mut memo = CopyMemo::default();
        let mut rl = Rset::new();
        rl.nodes.reserve(self.nodes.len());
        for n in self.nodes.iter() {
            if other.nodes.get(n.rank).is_some_and(|b| n.diff_is_empty(b)) {
                continue;
            }
            rl.add_node(n.copy_memo(4, &mut memo))?;
        }
        let mut cache = SetCache::default();
        for b in other.nodes.iter() {
            if rl.nodes.remove(b.rank).is_none() {
                continue;
            }
            let Some(n) = self.nodes.get(b.rank) else {
                continue;
            };
            let result = n.copy_memo(2, &mut memo).diff_cached(b, 0, &mut cache);
            if !result.is_empty() {
                rl.add_node(result.copy_memo(2, &mut memo))?;
            }
        }
        rl.nodes.compact();
        // the second copy_diff adds each node once to a new set
        rl.avail = rl.nodes.iter().map(|n| n.core_count() as i64).sum();
        if !rl.is_empty() {
            rl.scheduling.clone_from(&self.scheduling);
        }
        Ok(rl)
    }

    /// The error [`Rset::diff`] (and [`Rset::copy_diff`]) fail with on
    /// `self`, whatever the operand: a node without resources.
    pub fn check_copyable(&self) -> Result<(), RError> {
        match self.nodes.iter().find(|n| n.total() == 0) {
            Some(n) => Err(RError::EmptyNode(n.rank)),
            None => Ok(()),
        }
    }

    /// True if some node's hostname is also a property name of the set
    /// (an RFC 31 `properties` constraint then matches that node by name).
    pub fn hostname_is_property(&self) -> bool {
        let mut names: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for n in self.nodes.iter() {
            for (k, _) in n.props.iter() {
                names.insert(k.as_str());
            }
        }
        !names.is_empty()
            && self
                .nodes
                .iter()
                .any(|n| n.hostname.as_deref().is_some_and(|h| names.contains(h)))
    }

    /// The second half of [`Rset::diff`]: remove `other`'s ids rank by rank.
    fn remove_diff(&mut self, other: &Rset) {
        let mut cache = SetCache::default();
        for b in other.nodes.iter() {
            if let Some(na) = self.nodes.remove(b.rank) {
                let result = na.diff_cached(b, 0, &mut cache);
                if !result.is_empty() {
                    // The rank was detached, so this appends at the end.
                    let _ = self.add_node(result);
                }
            }
        }
        self.nodes.compact();
    }

    /// `self ∪ other` (`rlist_union`): `(self - other)` then append `other`.
    pub fn union(&self, other: &Rset) -> Result<Rset, RError> {
        let mut d = self.diff(other)?;
        d.append(other)?;
        Ok(d)
    }

    /// `self ∩ other` (`rlist_intersect`): for each rank of `other` (in its
    /// list order) also in `self` with a compatible hostname, the
    /// per-child intersection; empty results are dropped.  Properties are
    /// not kept; `scheduling` comes from `self` when the result is non-empty.
    pub fn intersect(&self, other: &Rset) -> Rset {
        let mut cache = SetCache::default();
        self.intersection_of(other.nodes.iter().map(|b| {
            let a = self.nodes.get(b.rank)?;
            a.intersect_ro(b, &mut cache)
        }))
    }

    /// Like [`Rset::intersect`], but performs flux's child-table lookups
    /// on `other` (which can change the order in which a later copy of
    /// `other` lists its children).  `flux R append` needs this.
    #[doc(hidden)]
    pub fn intersect_probe(&self, other: &mut Rset) -> Rset {
        let mut cache = SetCache::default();
        self.intersection_of(other.nodes.iter_mut().map(|b| {
            let a = self.nodes.get(b.rank)?;
            a.intersect(b, &mut cache)
        }))
    }

    /// The non-empty `parts` (in order), with `self`'s scheduling when
    /// any.
    fn intersection_of(&self, parts: impl Iterator<Item = Option<Node>>) -> Rset {
        let mut result = Rset::new();
        for x in parts.flatten() {
            if !x.is_empty() {
                let _ = result.add_node(x);
            }
        }
        if !result.is_empty() {
            result.scheduling.clone_from(&self.scheduling);
        }
        result
    }

    /// A copy holding only the listed ranks (unknown ranks are ignored),
    /// in ascending rank order (`rlist_copy_ranks`).
    pub fn copy_ranks(&self, ranks: &IdSet) -> Rset {
        let mut picked: Vec<&Node> = self
            .nodes
            .iter()
            .filter(|n| ranks.contains(n.rank))
            .collect();
        picked.sort_by_key(|n| n.rank);
        let mut result = Rset::new();
        for n in picked {
            let _ = result.add_node_new(n.copy());
        }
        if !result.is_empty() {
            result.scheduling.clone_from(&self.scheduling);
        }
        result
    }

    /// Remove the listed ranks (unknown ranks are ignored); returns how
    /// many nodes were removed (`rlist_remove_ranks`).
    pub fn remove_ranks(&mut self, ranks: &IdSet) -> usize {
        self.nodes.retain(|n| !ranks.contains(n.rank))
    }

    /// Renumber ranks `0..n-1` in rank order and each child's ids to
    /// `0..count-1`, except `gpu` ids (`rlist_remap`).
    pub fn remap(&mut self) {
        self.nodes.sort_by_rank();
        for (i, n) in self.nodes.iter_mut().enumerate() {
            n.rank = i as u32;
            n.remap();
        }
        self.nodes.reindex();
    }

    /// Assign hostnames in rank order from a hostlist whose size must equal
    /// the node count (`rlist_assign_hosts`).
    pub fn assign_hosts(&mut self, hosts: &str) -> Result<(), RError> {
        let hl = Hostlist::decode(hosts)
            .map_err(|_| RError::Nodelist(format!("invalid hostlist '{hosts}'")))?;
        self.assign_hostlist(&hl)
    }

    pub(crate) fn assign_hostlist(&mut self, hl: &Hostlist) -> Result<(), RError> {
        if hl.len() != self.nodes.len() {
            return Err(RError::Nodelist(format!(
                "nodelist has {} hosts but R has {} nodes",
                hl.len(),
                self.nodes.len()
            )));
        }
        self.nodes.sort_by_rank();
        for (n, host) in self.nodes.iter_mut().zip(hl.iter()) {
            n.hostname = Some(Arc::from(host));
        }
        Ok(())
    }

    /// Re-assign ranks so that the i-th host of `hosts` gets rank i
    /// (`rlist_rerank`).  The host count must equal the node count.  On
    /// failure the original mapping is restored.
    pub fn rerank(&mut self, hosts: &str) -> Result<(), RerankError> {
        let hl = Hostlist::decode(hosts).map_err(|_| RerankError::Hostlist(hosts.to_string()))?;
        let nnodes = self.nodes.len();
        if hl.len() > nnodes {
            return Err(RerankError::TooMany {
                hosts: hl.len(),
                nodes: nnodes,
            });
        }
        if hl.len() < nnodes {
            return Err(RerankError::TooFew {
                hosts: hl.len(),
                nodes: nnodes,
            });
        }
        self.nodes.sort_by_rank();
        let orig: Vec<Arc<str>> = match self.nodes.iter().map(|n| n.hostname.clone()).collect() {
            Some(v) => v,
            None => return Err(RerankError::NoHostnames),
        };
        // First node (in list order) with each hostname, as rlist_find_host.
        let mut first: HashMap<Arc<str>, usize> = HashMap::with_capacity(nnodes);
        for (i, h) in orig.iter().enumerate() {
            first.entry(h.clone()).or_insert(i);
        }
        let mut ranks: Vec<u32> = self.nodes.iter().map(|n| n.rank).collect();
        let mut failed = None;
        for (i, host) in hl.iter().enumerate() {
            match first.get(host.as_str()) {
                Some(&pos) => ranks[pos] = i as u32,
                None => {
                    failed = Some(host);
                    break;
                }
            }
        }
        if let Some(host) = failed {
            // Undo by re-ranking with the original (rank-ordered) hostnames.
            for (i, h) in orig.iter().enumerate() {
                if let Some(&pos) = first.get(h) {
                    ranks[pos] = i as u32;
                }
            }
            for (n, r) in self.nodes.iter_mut().zip(ranks) {
                n.rank = r;
            }
            self.nodes.reindex();
            return Err(RerankError::NotFound(host));
        }
        for (n, r) in self.nodes.iter_mut().zip(ranks) {
            n.rank = r;
        }
        self.nodes.reindex();
        Ok(())
    }

    /// The ranks of all nodes whose hostname is in `hosts`
    /// (`rlist_hosts_to_ranks`).  Every host must match at least one node.
    pub fn hosts_to_ranks(&self, hosts: &str) -> Result<IdSet, RError> {
        let hl = Hostlist::decode(hosts).map_err(|_| RError::msg("Hostlist cannot be decoded"))?;
        let mut by_host: HashMap<&str, Vec<u32>> = HashMap::new();
        for n in self.nodes.iter() {
            if let Some(h) = n.hostname.as_deref() {
                by_host.entry(h).or_default().push(n.rank);
            }
        }
        let mut ranks: Vec<u32> = Vec::new();
        let mut missing = Hostlist::new();
        for host in hl.iter() {
            match by_host.get(host.as_str()) {
                Some(r) => ranks.extend_from_slice(r),
                None => missing.push(&host),
            }
        }
        if !missing.is_empty() {
            return Err(RError::msg(format!("invalid hosts: {}", missing.encode())));
        }
        ranks.sort_unstable();
        ranks.dedup();
        Ok(IdSet::from_sorted_ranges(ranks.into_iter().map(|r| (r, r))).unwrap_or_default())
    }

    // ------------------------------------------------------------------
    // Properties

    /// Set property `name` on the ranks in `targets` (an idset string);
    /// every target rank must exist (`rlist_add_property`).
    pub fn add_property(&mut self, name: &str, targets: &str) -> Result<(), RError> {
        if let Some(c) = invalid_property_char(name, crate::PROPERTY_INVALID) {
            return Err(RError::msg(format!(
                "Invalid character '{c}' in property \"{name}\""
            )));
        }
        let ids = IdSet::parse(targets)
            .map_err(|_| RError::msg(format!("Invalid idset string '{targets}'")))?;
        let ranks = self.ranks();
        self.apply_property(name, &ids, &ranks)
    }

    fn apply_property(&mut self, name: &str, ids: &IdSet, ranks: &IdSet) -> Result<(), RError> {
        let unknown = ids.difference(ranks);
        let count = unknown.len();
        if count > 0 {
            return Err(RError::msg(format!(
                "{}{} not found in target resource list",
                if count == 1 { "rank " } else { "ranks " },
                unknown.encode()
            )));
        }
        let pname = Name::new(name);
        if self.nodes.len() as u64 == ranks.len() {
            // one node per rank: visit only the named ones (each node's
            // table sees the same inserts in the same order either way)
            for rank in ids.iter() {
                if let Some(n) = self.nodes.get_mut(rank) {
                    n.set_property(&pname);
                }
            }
            return Ok(());
        }
        for n in self.nodes.iter_mut() {
            if ids.contains(n.rank) {
                n.set_property(&pname);
            }
        }
        Ok(())
    }

    /// Apply an RFC 20 `properties` object (`{name: idset}`), validating
    /// everything before applying anything (`rlist_assign_properties`).
    pub fn assign_properties(&mut self, props: &Value) -> Result<(), RError> {
        let Value::Object(map) = props else {
            return Err(RError::msg("properties must be an object"));
        };
        // every value parsed once, in map order
        let mut parsed: Vec<(&String, IdSet)> = Vec::with_capacity(map.len());
        for (name, val) in map {
            let Value::String(s) = val else {
                return Err(RError::msg(format!(
                    "properties value '{}' not a string",
                    crate::json::dumps_compact(val)
                )));
            };
            if let Some(c) = invalid_property_char(name, crate::PROPERTY_INVALID) {
                return Err(RError::msg(format!(
                    "invalid character '{c}' in property \"{name}\""
                )));
            }
            match IdSet::parse(s) {
                Ok(ids) => parsed.push((name, ids)),
                Err(_) => {
                    return Err(RError::msg(format!(
                        "invalid idset '{s}' specified for property \"{name}\""
                    )))
                }
            }
        }
        let total: u64 = parsed
            .iter()
            .map(|(_, ids)| ids.len())
            .fold(0u64, u64::saturating_add);
        if total > crate::MAX_ITEMS {
            return Err(RError::TooLarge);
        }
        let ranks = self.ranks();
        for (name, ids) in &parsed {
            self.apply_property(name, ids, &ranks)?;
        }
        Ok(())
    }

    /// Properties as `(name, ranks)` in the order flux-core emits them.
    pub fn properties(&self) -> Vec<(String, IdSet)> {
        crate::encode::properties(self)
            .into_iter()
            .map(|(n, ids)| (n.as_str().to_string(), ids))
            .collect()
    }

    /// The property names, in [`Rset::properties`] order, without
    /// building the rank sets.
    pub fn property_names(&self) -> Vec<String> {
        crate::encode::property_names(self)
    }

    /// The property names in the order flux's Python bindings list them
    /// (`ResourceSet.get_properties()`): filled walking the node list in
    /// its current order rather than in rank order.
    pub fn property_names_in_list_order(&self) -> Vec<String> {
        crate::encode::property_names_in_list_order(self)
    }

    /// The lowest rank, if any.
    pub fn min_rank(&self) -> Option<u32> {
        self.nodes.iter().map(|n| n.rank).min()
    }

    /// The ranks carrying property `name`.
    pub fn property_ranks(&self, name: &str) -> IdSet {
        let mut v: Vec<u32> = self
            .nodes
            .iter()
            .filter(|n| n.has_property(name))
            .map(|n| n.rank)
            .collect();
        v.sort_unstable();
        v.dedup();
        IdSet::from_sorted_ranges(v.into_iter().map(|r| (r, r))).unwrap_or_default()
    }

    /// `rlist_properties_encode`: the properties object as JSON text, or
    /// `{}` when there are none.
    pub fn properties_encode(&self) -> String {
        match crate::encode::properties_json(self) {
            Some(v) => crate::json::dumps(&v),
            None => "{}".into(),
        }
    }
}

/// The first character of `s` in `bad`, if any (C's `strpbrk`).
pub(crate) fn invalid_property_char(s: &str, bad: &str) -> Option<char> {
    s.chars().find(|c| bad.contains(*c))
}

fn node_info(n: &Node) -> NodeInfo {
    let mut children: Vec<(String, IdSet)> = n
        .children
        .values_unordered()
        .map(|(k, v)| (k.as_str().to_string(), (**v).clone()))
        .collect();
    children.sort_by(|a, b| a.0.cmp(&b.0));
    let mut properties: Vec<String> = n
        .props
        .keys()
        .iter()
        .map(|k| k.as_str().to_string())
        .collect();
    properties.sort();
    NodeInfo {
        rank: n.rank,
        hostname: n.hostname.as_deref().map(str::to_string),
        children,
        properties,
    }
}
