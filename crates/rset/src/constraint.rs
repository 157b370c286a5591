//! RFC 31 job constraints over nodes (flux-core's librlist `match.c`).

use crate::error::RError;
use crate::json;
use crate::node::{CopyMemo, Node};
use crate::rset::{invalid_property_char, Rset};
use crate::zhash::{Name, ZTable};
use hostlist::Hostlist;
use idset::IdSet;
use serde_json::Value;
use std::collections::HashSet;

/// Characters not allowed in property queries (`^` is allowed: negation).
const QUERY_INVALID: &str = "!&'\"`|()";

/// Above this many hosts a `hostlist` constraint is matched with
/// `Hostlist::find` instead of a set of expanded names.
const EXPAND_LIMIT: usize = 1 << 16;

/// A compiled RFC 31 constraint.
#[derive(Debug, Clone)]
pub enum Constraint {
    /// `{}`: matches everything.
    Empty,
    /// `properties`: every entry must hold; `^name` negates.  A property
    /// also matches the node's hostname.
    Properties(Vec<String>),
    /// `hostlist`: the node's hostname is in the list.
    Hostlist(HostMatch),
    /// `ranks`: the node's rank is in the set.
    Ranks(IdSet),
    /// All sub-constraints hold (vacuously true when empty).
    And(Vec<Constraint>),
    /// Some sub-constraint holds (true when empty).
    Or(Vec<Constraint>),
    /// Not all sub-constraints hold (false when empty).
    Not(Vec<Constraint>),
}

/// Hostnames to match: expanded when small, compressed otherwise.
#[derive(Debug, Clone)]
pub enum HostMatch {
    /// Expanded hostnames.
    Set(HashSet<String>),
    /// A large hostlist, searched per node.
    List(Hostlist),
}

impl HostMatch {
    fn contains(&self, host: &str) -> bool {
        match self {
            HostMatch::Set(s) => s.contains(host),
            HostMatch::List(l) => l.find(host).is_some(),
        }
    }
}

fn err(s: impl Into<String>) -> RError {
    RError::msg(s)
}

impl Constraint {
    /// Compile a constraint object (`job_constraint_create`), with
    /// flux-core's error texts.  Note that, as in flux-core, any error
    /// inside an `and`/`or`/`not` operand is reported as "Out of memory".
    pub fn from_json(c: &Value) -> Result<Constraint, RError> {
        let Value::Object(m) = c else {
            return Err(err("constraint must be JSON object"));
        };
        if m.len() > 1 {
            return Err(err("constraint must only contain 1 element"));
        }
        let Some((op, values)) = m.iter().next() else {
            return Ok(Constraint::Empty);
        };
        match op.as_str() {
            "properties" => {
                let Value::Array(a) = values else {
                    return Err(err("properties value must be an array"));
                };
                let mut props = Vec::with_capacity(a.len());
                for e in a {
                    let Value::String(s) = e else {
                        return Err(err("non-string property specified"));
                    };
                    if let Some(ch) = invalid_property_char(s, QUERY_INVALID) {
                        return Err(err(format!("invalid character '{ch}' in property \"{s}\"")));
                    }
                    props.push(s.clone());
                }
                Ok(Constraint::Properties(props))
            }
            "hostlist" => {
                let mut hl = Hostlist::new();
                if let Value::Array(a) = values {
                    for e in a {
                        // Non-strings are skipped (hostlist_append (NULL)).
                        if let Value::String(s) = e {
                            match Hostlist::decode(s) {
                                Ok(h) => hl.append(&h),
                                Err(_) => {
                                    return Err(err(format!(
                                        "invalid hostlist '{s}' in {}",
                                        json::dumps(values)
                                    )))
                                }
                            }
                        }
                    }
                }
                let hm = if hl.len() <= EXPAND_LIMIT {
                    HostMatch::Set(hl.iter().collect())
                } else {
                    HostMatch::List(hl)
                };
                Ok(Constraint::Hostlist(hm))
            }
            "ranks" => {
                let mut ids = IdSet::new();
                if let Value::Array(a) = values {
                    for e in a {
                        let parsed = match e {
                            Value::String(s) => IdSet::parse(s).ok(),
                            _ => None,
                        };
                        match parsed {
                            Some(p) => ids.add(&p),
                            None => {
                                let shown = match e {
                                    Value::String(s) => s.clone(),
                                    _ => "(null)".to_string(),
                                };
                                return Err(err(format!(
                                    "invalid idset '{shown}' in {}",
                                    json::dumps(values)
                                )));
                            }
                        }
                    }
                }
                Ok(Constraint::Ranks(ids))
            }
            "and" | "or" | "not" => {
                let Value::Array(a) = values else {
                    return Err(err(format!("{op} operator value must be an array")));
                };
                let mut subs = Vec::with_capacity(a.len());
                for e in a {
                    match Constraint::from_json(e) {
                        Ok(c) => subs.push(c),
                        Err(_) => return Err(err("Out of memory")),
                    }
                }
                Ok(match op.as_str() {
                    "and" => Constraint::And(subs),
                    "or" => Constraint::Or(subs),
                    _ => Constraint::Not(subs),
                })
            }
            other => Err(err(format!("unknown constraint operator: {other}"))),
        }
    }

    /// Evaluate against a node, performing flux's property lookups on
    /// `node`'s (copied) property table.
    pub(crate) fn matches(&self, node: &mut Node) -> bool {
        match self {
            Constraint::Empty => true,
            Constraint::Properties(props) => props.iter().all(|p| has(node, p)),
            Constraint::Hostlist(h) => node.hostname.as_deref().is_some_and(|n| h.contains(n)),
            Constraint::Ranks(ids) => ids.contains(node.rank),
            Constraint::And(v) => v.iter().all(|c| c.matches(node)),
            Constraint::Or(v) => v.is_empty() || v.iter().any(|c| c.matches(node)),
            Constraint::Not(v) => !v.iter().all(|c| c.matches(node)),
        }
    }
}

impl Constraint {
    /// Collect the property names this constraint mentions (without `^`);
    /// false if it also looks at hostnames or ranks.
    fn property_names(&self, out: &mut Vec<String>) -> bool {
        match self {
            Constraint::Empty => true,
            Constraint::Properties(props) => {
                for p in props {
                    out.push(p.strip_prefix('^').unwrap_or(p).to_string());
                }
                true
            }
            Constraint::Hostlist(_) | Constraint::Ranks(_) => false,
            Constraint::And(v) | Constraint::Or(v) | Constraint::Not(v) => {
                let mut ok = true;
                for c in v {
                    ok &= c.property_names(out);
                }
                ok
            }
        }
    }
}

/// `rnode_has`: a property or the hostname, `^` negating.
fn has(node: &mut Node, property: &str) -> bool {
    let (prop, negate) = match property.strip_prefix('^') {
        Some(p) => (p, true),
        None => (property, false),
    };
    let mut found = false;
    if !node.props.is_empty() {
        found = node.props.lookup(&Name::new(prop)).is_some();
    }
    if !found {
        found = node.hostname.as_deref() == Some(prop);
    }
    found != negate
}

impl Rset {
    /// A copy of the nodes matching an RFC 31 constraint object
    /// (`rlist_copy_constraint`), in list order.  `scheduling` is kept
    /// when the result is non-empty.
    ///
    /// Deviation: flux-core crashes when a `properties` constraint meets a
    /// node without hostname and without a matching property; here such a
    /// node simply does not match.
    pub fn copy_constraint(&self, constraint: &Value) -> Result<Rset, RError> {
        let c = Constraint::from_json(constraint)?;
        Ok(self.copy_matching(&c))
    }

    /// [`Rset::copy_constraint`] with a compiled constraint.
    pub fn copy_matching(&self, c: &Constraint) -> Rset {
        self.copy_matching_where(c, |_| true)
    }

    /// [`Rset::copy_matching`] looking only at the nodes whose rank is in
    /// `ranks`.  The same result whenever no node outside `ranks` matches
    /// `c` (the caller knows, e.g. from the nodes' property sets), with
    /// work proportional to `ranks` rather than to the whole set.
    pub fn copy_matching_ranks(&self, c: &Constraint, ranks: &IdSet) -> Rset {
        self.copy_matching_where(c, |rank| ranks.contains(rank))
    }

    fn copy_matching_where(&self, c: &Constraint, keep: impl Fn(u32) -> bool) -> Rset {
        let mut result = Rset::new();
        result.nodes.reserve(self.nodes.len());
        let mut memo = MatchMemo::new(c);
        let mut copies = CopyMemo::default();
        for n in self.nodes.iter() {
            if !keep(n.rank) {
                continue;
            }
            if let Some(props) = memo.matching_props(c, n) {
                let _ = result.add_node_new(n.copy_with_props(props, &mut copies));
            }
        }
        if !result.is_empty() {
            result.scheduling.clone_from(&self.scheduling);
        }
        result
    }

    /// [`Rset::copy_matching_ranks`] for several constraints in one pass:
    /// `group(rank)` names the constraint (an index into `cs`) a node is
    /// tried against, if any.  Result `i` is what
    /// `copy_matching_ranks(&cs[i], ranks_i)` returns for the ranks that
    /// `group` maps to `i`.
    pub fn copy_matching_groups(
        &self,
        cs: &[Constraint],
        group: impl Fn(u32) -> Option<usize>,
    ) -> Vec<Rset> {
        let mut sizes = vec![0usize; cs.len()];
        for n in self.nodes.iter() {
            if let Some(s) = group(n.rank).and_then(|i| sizes.get_mut(i)) {
                *s += 1;
            }
        }
        let mut out: Vec<Rset> = sizes
            .iter()
            .map(|&n| {
                let mut r = Rset::new();
                r.nodes.reserve(n);
                r
            })
            .collect();
        let mut memos: Vec<MatchMemo> = cs.iter().map(MatchMemo::new).collect();
        let mut copies = CopyMemo::default();
        for n in self.nodes.iter() {
            let Some(i) = group(n.rank) else { continue };
            let (Some(c), Some(memo), Some(result)) = (cs.get(i), memos.get_mut(i), out.get_mut(i))
            else {
                continue;
            };
            if let Some(props) = memo.matching_props(c, n) {
                let _ = result.add_node_new(n.copy_with_props(props, &mut copies));
            }
        }
        for result in out.iter_mut() {
            if !result.is_empty() {
                result.scheduling.clone_from(&self.scheduling);
            }
        }
        out
    }
}

/// Matching a constraint against nodes, remembering the outcome per
/// property-table state: the lookups flux performs while matching happen
/// on the original's property table before it is copied, so the copy's
/// table is the original's after those lookups, duplicated.  Both the
/// outcome and that table depend only on the table's state (and on the
/// hostname, when it equals a property the constraint names, or when the
/// constraint looks at hostnames or ranks: then nothing is remembered).
struct MatchMemo {
    /// The constraint names only properties (no hostlist or ranks).
    props_only: bool,
    /// Property names the constraint mentions (without `^`).
    names: Vec<String>,
    /// (table before matching, matched, the copy's table).
    seen: Vec<(ZTable<()>, bool, ZTable<()>)>,
}

impl MatchMemo {
    fn new(c: &Constraint) -> MatchMemo {
        let mut names = Vec::new();
        let props_only = c.property_names(&mut names);
        MatchMemo {
            props_only,
            names,
            seen: Vec::new(),
        }
    }

    /// The copy's property table if `n` matches `c`.
    fn matching_props(&mut self, c: &Constraint, n: &Node) -> Option<ZTable<()>> {
        let cacheable = self.props_only
            && n.hostname
                .as_deref()
                .is_none_or(|h| !self.names.iter().any(|p| p == h));
        if cacheable {
            if let Some((_, matched, props)) =
                self.seen.iter().find(|(t, _, _)| t.same_shape(&n.props))
            {
                return matched.then(|| props.clone());
            }
        }
        // Replay flux's lookups on a scratch node so the copy sees the
        // same table shape.
        let mut probe = Node {
            rank: n.rank,
            hostname: n.hostname.clone(),
            children: ZTable::new(),
            props: n.props.clone(),
        };
        let matched = c.matches(&mut probe);
        let props = probe.props.dup();
        if cacheable && self.seen.len() < MEMO_MAX {
            self.seen.push((n.props.clone(), matched, props.clone()));
        }
        matched.then_some(props)
    }
}

/// Distinct property-table states remembered per constraint.
const MEMO_MAX: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    fn rl() -> Rset {
        let r = r#"{"version":1,"execution":{"R_lite":[{"rank":"1-10","children":{"core":"0-1"}}],
            "nodelist":["foo[1-10]"],"properties":{"foo":"1-3","bar":"7"}}}"#;
        Rset::from_json_str(r).unwrap_or_default()
    }

    fn run(c: &str) -> String {
        let v = json::loads(c.as_bytes()).unwrap_or(Value::Null);
        match rl().copy_constraint(&v) {
            Ok(r) => r.dumps(),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn upstream_vectors() {
        assert_eq!(run(r#"{"properties": ["na"]}"#), "");
        assert_eq!(run(r#"{"properties": ["foo"]}"#), "rank[1-3]/core[0-1]");
        assert_eq!(run(r#"{"properties": ["bar"]}"#), "rank7/core[0-1]");
        assert_eq!(
            run(r#"{"properties": ["^bar"]}"#),
            "rank[1-6,8-10]/core[0-1]"
        );
        assert_eq!(run(r#"{"properties": ["foo5"]}"#), "rank5/core[0-1]");
        assert_eq!(
            run(r#"{"properties": ["^foo5"]}"#),
            "rank[1-4,6-10]/core[0-1]"
        );
        assert_eq!(
            run(r#"{"hostlist": ["foo[2,3,7]"]}"#),
            "rank[2-3,7]/core[0-1]"
        );
        assert_eq!(
            run(r#"{ "not": [{"hostlist": ["foo[2,3,7]"]}] }"#),
            "rank[1,4-6,8-10]/core[0-1]"
        );
        assert_eq!(
            run(r#"{ "not": [{"ranks": ["0-4"]}] }"#),
            "rank[5-10]/core[0-1]"
        );
    }

    #[test]
    fn empty_operators() {
        assert_eq!(run("{}"), "rank[1-10]/core[0-1]");
        assert_eq!(run(r#"{"and": []}"#), "rank[1-10]/core[0-1]");
        assert_eq!(run(r#"{"or": []}"#), "rank[1-10]/core[0-1]");
        assert_eq!(run(r#"{"not": []}"#), "");
        assert_eq!(
            run(r#"{"and": [{"hostlist": ["foo[1-2]"]}, {"properties": ["foo"]}]}"#),
            "rank[1-2]/core[0-1]"
        );
        assert_eq!(
            run(r#"{"or": [{"ranks": ["1"]}, {"properties": ["bar"]}]}"#),
            "rank[1,7]/core[0-1]"
        );
    }

    #[test]
    fn error_texts() {
        for (text, want) in [
            ("[]", "error: constraint must be JSON object"),
            (
                r#"{"a":[],"b":[]}"#,
                "error: constraint must only contain 1 element",
            ),
            (r#"{"foo": []}"#, "error: unknown constraint operator: foo"),
            (
                r#"{"properties": "x"}"#,
                "error: properties value must be an array",
            ),
            (
                r#"{"properties": [1]}"#,
                "error: non-string property specified",
            ),
            (
                r#"{"properties": ["a|b"]}"#,
                "error: invalid character '|' in property \"a|b\"",
            ),
            (
                r#"{"and": 1}"#,
                "error: and operator value must be an array",
            ),
            (r#"{"and": [{"properties": [1]}]}"#, "error: Out of memory"),
            (
                r#"{"ranks": ["0-", "1"]}"#,
                "error: invalid idset '0-' in [\"0-\", \"1\"]",
            ),
            (
                r#"{"hostlist": ["foo[1-"]}"#,
                "error: invalid hostlist 'foo[1-' in [\"foo[1-\"]",
            ),
        ] {
            assert_eq!(run(text), want, "{text}");
        }
    }
}
