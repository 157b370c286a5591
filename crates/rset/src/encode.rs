//! [`Rset`] → R JSON (`rlist_to_R`) and the short form (`rlist_dumps`).

use crate::node::Node;
use crate::nodelist::FastMap;
use crate::rset::Rset;
use crate::zhash::{Name, ZTable};
use idset::{Format, IdSet};
use serde_json::{Map, Number, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// A group of nodes with identical children (flux's `multi_rnode`).
struct Group<'a> {
    rep: &'a Node,
    /// The representative's children table after flux's comparison
    /// lookups, when those changed it.
    rep_children: Option<ZTable<Arc<IdSet>>>,
    ranks: Vec<u32>,
}

fn ids_from_ranks(mut ranks: Vec<u32>) -> IdSet {
    ranks.sort_unstable();
    ranks.dedup();
    IdSet::from_sorted_ranges(ranks.into_iter().map(|r| (r, r))).unwrap_or_default()
}

/// Sorted name signature of a node's children.
fn name_sig(n: &Node) -> u64 {
    n.children
        .values_unordered()
        .map(|(k, _)| k.hash().wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(17))
        .fold(0u64, u64::wrapping_add)
}

/// Emulate `rnode_cmp (rep, n) == 0` including its lookups into `table`
/// (n's children).
fn cmp_with_lookups(rep_children: &ZTable<Arc<IdSet>>, table: &mut ZTable<Arc<IdSet>>) -> bool {
    if rep_children.len() != table.len() {
        return false;
    }
    for (name, ids) in rep_children.iter() {
        match table.lookup(name) {
            None => return false,
            Some(other) => {
                if **other != **ids {
                    return false;
                }
            }
        }
    }
    true
}

/// Group nodes in the given order (`rlist_mrlist`).  With `emulate`, the
/// child-table lookups flux performs while comparing nodes are replayed
/// where they could change a table (so that the representatives' child
/// order is flux's); otherwise grouping alone is computed.
fn group<'a>(nodes: impl Iterator<Item = &'a Node>, emulate: bool) -> Vec<Group<'a>> {
    let mut groups: Vec<Group<'a>> = Vec::new();
    let mut by_hash: FastMap<u64, Vec<usize>> = FastMap::default();
    // For each child count: the name signature of the groups seen so far,
    // or None once two different signatures were seen.
    let mut sigs: HashMap<usize, Option<u64>> = HashMap::new();
    for n in nodes {
        let h = n.shape_hash();
        let found = by_hash
            .get(&h)
            .and_then(|c| c.iter().copied().find(|&g| groups[g].rep.same_shape(n)));
        let mut mutated = None;
        if emulate {
            let count = n.children.len();
            let sig = name_sig(n);
            let safe = n.children.present_lookups_are_inert()
                && match sigs.get(&count) {
                    None => true,
                    Some(Some(s)) => *s == sig,
                    Some(None) => false,
                };
            if !safe {
                let mut table = n.children.clone();
                let upto = found.unwrap_or(groups.len());
                for g in &groups[..upto] {
                    let rep_table = g.rep_children.as_ref().unwrap_or(&g.rep.children);
                    if cmp_with_lookups(rep_table, &mut table) {
                        break;
                    }
                }
                if found.is_none() {
                    mutated = Some(table);
                }
            }
            if found.is_none() {
                sigs.entry(count)
                    .and_modify(|s| {
                        if *s != Some(sig) {
                            *s = None;
                        }
                    })
                    .or_insert(Some(sig));
            }
        }
        match found {
            Some(g) => groups[g].ranks.push(n.rank),
            None => {
                by_hash.entry(h).or_default().push(groups.len());
                groups.push(Group {
                    rep: n,
                    rep_children: mutated,
                    ranks: vec![n.rank],
                });
            }
        }
    }
    groups
}

/// The short form (`rlist_dumps`).
pub(crate) fn dumps(rl: &Rset) -> String {
    let mut out = String::new();
    for g in group(rl.nodes.iter(), false) {
        if g.rep.total() == 0 {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str("rank");
        out.push_str(&ids_from_ranks(g.ranks).encode_with(Format::BRACKETED));
        out.push('/');
        g.rep.child_dumps(&mut out);
    }
    out
}

fn sorted_nodes(rl: &Rset) -> Vec<&Node> {
    let mut v: Vec<&Node> = rl.nodes.iter().collect();
    if !rl.nodes.is_sorted() {
        v.sort_by_key(|n| n.rank);
    }
    v
}

/// Properties as flux's `rlist_properties` builds them: a hash of
/// name → ranks filled in rank order, read back in hash order.
pub(crate) fn properties(rl: &Rset) -> Vec<(Name, IdSet)> {
    properties_of(&sorted_nodes(rl))
}

fn properties_of(nodes: &[&Node]) -> Vec<(Name, IdSet)> {
    let mut table: ZTable<Vec<u32>> = ZTable::new();
    for n in nodes {
        if n.props.is_empty() {
            continue;
        }
        for (name, _) in n.props.iter() {
            match table.lookup(name) {
                Some(v) => v.push(n.rank),
                None => {
                    table.insert(name.clone(), vec![n.rank]);
                }
            }
        }
    }
    table
        .iter()
        .map(|(k, v)| (k.clone(), ids_from_ranks(v.clone())))
        .collect()
}

/// The names of [`properties`], in the same order: the same table
/// operations (the order depends on them, not on the values).
pub(crate) fn property_names(rl: &Rset) -> Vec<String> {
    names_of(sorted_nodes(rl))
}

/// The property names as flux's Python `ResourceSet.get_properties()`
/// reads them: the same table filled walking the node list as it stands
/// (merges append, only encoding sorts it).
pub(crate) fn property_names_in_list_order(rl: &Rset) -> Vec<String> {
    names_of(rl.nodes.iter().collect())
}

fn names_of(nodes: Vec<&Node>) -> Vec<String> {
    let mut table: ZTable<()> = ZTable::new();
    for n in nodes {
        if n.props.is_empty() {
            continue;
        }
        for (name, _) in n.props.iter() {
            if table.lookup(name).is_none() {
                table.insert(name.clone(), ());
            }
        }
    }
    table.iter().map(|(k, _)| k.as_str().to_string()).collect()
}

/// The `properties` object, or `None` when there are no properties.
pub(crate) fn properties_json(rl: &Rset) -> Option<Value> {
    props_value(properties(rl))
}

fn props_value(props: Vec<(Name, IdSet)>) -> Option<Value> {
    if props.is_empty() {
        return None;
    }
    let mut m = Map::new();
    for (name, ids) in props {
        m.insert(name.as_str().to_string(), Value::String(ids.encode()));
    }
    Some(Value::Object(m))
}

fn real(v: f64) -> Value {
    Number::from_f64(v).map_or(Value::Null, Value::Number)
}

fn children_json(table: &ZTable<Arc<IdSet>>) -> Value {
    let mut m = Map::new();
    for (name, ids) in table.iter() {
        if !ids.is_empty() {
            m.insert(name.as_str().to_string(), Value::String(ids.encode()));
        }
    }
    Value::Object(m)
}

/// `rlist_to_R`.
pub(crate) fn to_json(rl: &Rset) -> Value {
    let nodes = sorted_nodes(rl);
    let mut r_lite = Vec::new();
    for g in group(nodes.iter().copied(), true) {
        if g.rep.total() == 0 {
            continue;
        }
        let table = g.rep_children.as_ref().unwrap_or(&g.rep.children);
        let mut e = Map::new();
        e.insert(
            "rank".into(),
            Value::String(ids_from_ranks(g.ranks).encode()),
        );
        e.insert("children".into(), children_json(table));
        r_lite.push(Value::Object(e));
    }
    let mut exec = Map::new();
    exec.insert("R_lite".into(), Value::Array(r_lite));
    if rl.nslots > 0 {
        exec.insert("nslots".into(), Value::Number(rl.nslots.into()));
    }
    exec.insert("starttime".into(), real(rl.starttime));
    exec.insert("expiration".into(), real(rl.expiration));
    let hosts: Option<Vec<&str>> = nodes.iter().map(|n| n.hostname.as_deref()).collect();
    if let Some(hosts) = hosts {
        let hl: hostlist::Hostlist = hosts.into_iter().collect();
        exec.insert(
            "nodelist".into(),
            Value::Array(vec![Value::String(hl.encode())]),
        );
    }
    if let Some(p) = props_value(properties_of(&nodes)) {
        exec.insert("properties".into(), p);
    }
    let mut top = Map::new();
    top.insert("version".into(), Value::Number(1.into()));
    top.insert("execution".into(), Value::Object(exec));
    if let Some(s) = &rl.scheduling {
        top.insert("scheduling".into(), s.clone());
    }
    Value::Object(top)
}

impl Rset {
    /// R as flux-core's `rlist_to_R` builds it: `version`, `execution`
    /// with `R_lite` (nodes with identical children grouped, groups ordered
    /// by lowest rank, empty children and empty nodes omitted), `nslots` if
    /// set, `starttime` and `expiration` (always, as reals), `nodelist` (one
    /// hostlist, only if every node has a hostname), `properties` (if any),
    /// and `scheduling` (if present).  Key order is flux's.
    pub fn to_json(&self) -> Value {
        to_json(self)
    }

    /// [`Rset::to_json`] serialized as `json_dumps (R, 0)` (what `flux R`
    /// prints, without the newline).
    pub fn encode(&self) -> String {
        crate::json::dumps(&self.to_json())
    }

    /// The short form used by `flux R decode --short`:
    /// `rank[0-1]/core[0-3],gpu0 rank2/core0` — groups of identical nodes
    /// in list order, `core` first then other children by name, brackets
    /// only around more than one id, empty nodes omitted; `""` when empty.
    pub fn dumps(&self) -> String {
        dumps(self)
    }
}
