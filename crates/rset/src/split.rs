//! `flux resource list`'s split of a resource set by property
//! combination (flux-resource.py's `split_by_property_combinations`),
//! shared by the list view and the service's summary of it.

use crate::zhash::{Name, ZTable};
use crate::{Constraint, RError, Rset};
use serde_json::Value;
use std::collections::HashMap;

impl Rset {
    /// The order [`Rset::property_names`] lists the property names of a
    /// set in when they first appear, walking its nodes by rank, in
    /// `first_seen` order (flux keeps them in a hash table: the order is
    /// the table's, not the order of appearance).
    pub fn property_order<'a>(first_seen: impl IntoIterator<Item = &'a str>) -> Vec<String> {
        let mut table: ZTable<()> = ZTable::new();
        for name in first_seen {
            let name = Name::new(name);
            if table.lookup(&name).is_none() {
                table.insert(name, ());
            }
        }
        table.iter().map(|(k, _)| k.as_str().to_string()).collect()
    }

    /// One subset per distinct set of properties, in the order flux
    /// generates the constraints (see [`split_by_properties`]); an error
    /// when a property name makes no valid constraint.
    pub fn split_by_properties(&self) -> Result<Vec<Rset>, RError> {
        split_by_properties(self)
    }
}

/// itertools.combinations order over `n` names: sizes 1..n in
/// lexicographic index order, then the empty set last.
fn combination_rank(indices: &[usize], n: usize) -> (usize, Vec<usize>) {
    if indices.is_empty() {
        (n + 1, Vec::new())
    } else {
        (indices.len(), indices.to_vec())
    }
}

/// `split_by_property_combinations(rset)`: one subset per distinct set of
/// properties, in the order flux generates the constraints.
///
/// flux matches every node against every combination's constraint.  A
/// constraint names every property, each required or negated, so only the
/// nodes with exactly that property set can match it; they are matched
/// (with flux's lookups, which shape the copies' property tables) and the
/// others skipped.  That shortcut does not hold when a property is also a
/// hostname (a constraint property matches the node of that name too);
/// then every node is tried, as flux does.
pub(crate) fn split_by_properties(r: &Rset) -> Result<Vec<Rset>, RError> {
    let names = r.property_names();
    let nodes = r.node_properties();
    let name_is_host = nodes
        .iter()
        .any(|(_, h, _)| h.is_some_and(|h| names.iter().any(|n| n == h)));
    // Each node's combination (sorted name indices), and the combinations
    // in order of first appearance.
    let mut combo_of: HashMap<Vec<usize>, usize> = HashMap::new();
    let mut combos: Vec<Vec<usize>> = Vec::new();
    let mut node_combo: HashMap<u32, usize> = HashMap::with_capacity(nodes.len());
    for (rank, _, props) in &nodes {
        let mut idx: Vec<usize> = props
            .iter()
            .filter_map(|p| names.iter().position(|n| n == p))
            .collect();
        idx.sort_unstable();
        let i = match combo_of.get(&idx) {
            Some(i) => *i,
            None => {
                combos.push(idx.clone());
                combo_of.insert(idx, combos.len() - 1);
                combos.len() - 1
            }
        };
        node_combo.insert(*rank, i);
    }
    let mut order: Vec<usize> = (0..combos.len()).collect();
    order.sort_by_key(|&i| combos.get(i).map(|c| combination_rank(c, names.len())));
    let mut compiled = Vec::with_capacity(order.len());
    for &i in &order {
        let c = combos.get(i).map(Vec::as_slice).unwrap_or(&[]);
        let props: Vec<Value> = names
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if c.contains(&i) {
                    Value::String(n.clone())
                } else {
                    Value::String(format!("^{n}"))
                }
            })
            .collect();
        let constraint = serde_json::json!({ "properties": props });
        compiled.push(Constraint::from_json(&constraint)?);
    }
    if name_is_host {
        return Ok(compiled.iter().map(|c| r.copy_matching(c)).collect());
    }
    // position of each combination in `order`
    let mut slot = vec![0usize; combos.len()];
    for (pos, &i) in order.iter().enumerate() {
        if let Some(s) = slot.get_mut(i) {
            *s = pos;
        }
    }
    Ok(r.copy_matching_groups(&compiled, |rank| {
        node_combo.get(&rank).and_then(|i| slot.get(*i).copied())
    }))
}
