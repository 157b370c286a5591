//! The ranks and hostnames of an R without building its nodes.
//!
//! `flux resource status` needs only two things from the instance R: its
//! ranks and its hostnames in rank order.  [`Rset::from_json`] builds one
//! node per rank (131,072 of them for a large cluster, with their child
//! tables), which costs far more than the rest of the view.  An R as the
//! service sends it is a few `R_lite` entries of rank ranges and a
//! compressed nodelist, so [`RSummary::from_json`] reads those directly,
//! in time proportional to the size of the JSON.

use crate::json::is_integer;
use crate::node::Node;
use crate::parse::parse_children;
use crate::rset::invalid_property_char;
use crate::{RError, Rset, MAX_ITEMS, MAX_NODES, PROPERTY_INVALID};
use hostlist::Hostlist;
use idset::IdSet;
use serde_json::{Map, Value};

/// The ranks of an R and its hostnames in rank order: what
/// `Rset::from_json(v)` followed by [`Rset::ranks`] and [`Rset::nodelist`]
/// gives, with the same errors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RSummary {
    /// The ranks present.
    pub ranks: IdSet,
    /// The hostnames in rank order (`None` when R has no nodelist), built
    /// host by host as [`Rset::nodelist`] builds it, so that its grouping
    /// (and with it `find` and `encode`) is the same.
    pub nodelist: Option<Hostlist>,
}

impl RSummary {
    /// Summarise an R object.  Accepts and rejects exactly what
    /// [`Rset::from_json`] does, with the same error: anything but the
    /// plain shape (entries whose ranks overlap, odd values, anything
    /// [`Rset::from_json`] would refuse) is handed to [`Rset::from_json`].
    pub fn from_json(v: &Value) -> Result<RSummary, RError> {
        if let Some(s) = summarize(v) {
            return Ok(s);
        }
        let r = Rset::from_json(v)?;
        Ok(RSummary::of(&r))
    }

    /// The summary of a parsed set.
    pub fn of(r: &Rset) -> RSummary {
        RSummary {
            ranks: r.ranks(),
            nodelist: r.nodelist(),
        }
    }
}

fn object(v: &Value) -> Option<&Map<String, Value>> {
    match v {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The fast path: `None` whenever it cannot vouch for the result of
/// [`Rset::from_json`] (including every error).
fn summarize(v: &Value) -> Option<RSummary> {
    let top = object(v)?;
    let version = top.get("version").filter(|v| is_integer(v))?;
    if version.as_i64()? != 1 {
        return None;
    }
    let exec = object(top.get("execution")?)?;
    let r_lite = exec.get("R_lite")?;
    if let Some(n) = exec.get("nslots") {
        if !is_integer(n) {
            return None;
        }
    }
    for k in ["starttime", "expiration"] {
        if exec.get(k).is_some_and(|t| !matches!(t, Value::Number(_))) {
            return None;
        }
    }
    // RFC 20's rules the parser checks (R_lite an array, expiration after
    // starttime): left to it, for its error.
    let time = |k| exec.get(k).and_then(Value::as_f64).unwrap_or(0.0);
    let (start, end) = (time("starttime"), time("expiration"));
    if !r_lite.is_array() || (start > 0.0 && end > 0.0 && end <= start) {
        return None;
    }
    let mut ranks = IdSet::new();
    let mut items = 0u64;
    if let Value::Array(entries) = r_lite {
        for entry in entries {
            let m = object(entry)?;
            let ids = IdSet::parse(m.get("rank")?.as_str()?).ok()?;
            let children = m.get("children")?;
            if ids.is_empty() {
                continue;
            }
            // A rank in two entries merges children: left to the parser.
            if ranks.intersects(&ids) {
                return None;
            }
            if ranks.len() + ids.len() > MAX_NODES as u64 {
                return None;
            }
            let first = ids.first()?;
            let kids = parse_children(children, first).ok()?;
            items = items.saturating_add(ids.len().saturating_mul(kids.len().max(1) as u64));
            if items > MAX_ITEMS {
                return None;
            }
            let mut template = Node::new(None, first);
            for (name, set) in &kids {
                template.add_child(name, set).ok()?;
            }
            ranks.add(&ids);
        }
    }
    let nnodes = ranks.len();
    let nodelist = match exec.get("nodelist") {
        // Rset::nodelist() of no nodes is the empty list
        None => (nnodes == 0).then(Hostlist::new),
        Some(nl) => {
            let mut hl = Hostlist::new();
            if let Value::Array(items) = nl {
                for item in items {
                    if let Value::String(s) = item {
                        let part = Hostlist::decode(s).ok()?;
                        if (hl.len() + part.len()) as u64 > nnodes {
                            return None;
                        }
                        hl.append(&part);
                    }
                }
            }
            if hl.len() as u64 != nnodes {
                return None;
            }
            // Rset::nodelist() pushes the hostnames one by one.
            let mut pushed = Hostlist::new();
            pushed.push_hosts_of(&hl, 0..hl.len());
            Some(pushed)
        }
    };
    if let Some(p) = exec.get("properties") {
        properties_ok(p, &ranks)?;
    }
    Some(RSummary { ranks, nodelist })
}

/// `Rset::assign_properties` would accept `props` for a set of `ranks`.
fn properties_ok(props: &Value, ranks: &IdSet) -> Option<()> {
    let map = object(props)?;
    let mut total = 0u64;
    for (name, val) in map {
        let ids = IdSet::parse(val.as_str()?).ok()?;
        if invalid_property_char(name, PROPERTY_INVALID).is_some() || !ids.is_subset(ranks) {
            return None;
        }
        total = total.saturating_add(ids.len());
    }
    (total <= MAX_ITEMS).then_some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The summary and the full parse agree, result or error.
    fn same(v: &Value) -> Option<RSummary> {
        let full = Rset::from_json(v).map(|r| RSummary::of(&r));
        let fast = RSummary::from_json(v);
        assert_eq!(fast, full, "{v}");
        // the same grouping, not only the same hosts
        let enc = |s: &Result<RSummary, RError>| {
            s.as_ref()
                .ok()
                .map(|s| s.nodelist.as_ref().map(|h| (h.encode(), h.range_count())))
        };
        assert_eq!(enc(&fast), enc(&full), "{v}");
        full.ok()
    }

    fn r(entries: Value, nodelist: Option<Value>) -> Value {
        let mut exec = json!({ "R_lite": entries, "starttime": 0.0, "expiration": 0.0 });
        if let (Some(nl), Some(m)) = (nodelist, exec.as_object_mut()) {
            m.insert("nodelist".into(), nl);
        }
        json!({ "version": 1, "execution": exec })
    }

    #[test]
    fn large_grouped_r_takes_the_fast_path() {
        let v = r(
            json!([{"rank": "0-131071", "children": {"core": "0-3"}}]),
            Some(json!(["sim[0-131071]"])),
        );
        let s = summarize(&v);
        assert_eq!(
            s.as_ref().map(|s| s.ranks.encode()),
            Some("0-131071".into())
        );
        assert_eq!(
            s.as_ref().and_then(|s| s.nodelist.as_ref()).map(|h| (
                h.len(),
                h.range_count(),
                h.encode()
            )),
            Some((131072, 1, "sim[0-131071]".to_string()))
        );
        assert_eq!(same(&v), s);
    }

    #[test]
    fn agrees_with_the_parser() {
        let cases = [
            r(json!([]), None),
            r(
                json!([{"rank": "0-3", "children": {"core": "0-7", "gpu": "0-1"}}]),
                Some(json!(["foo[1-4]"])),
            ),
            // hosts grouped differently than pushes would group them
            r(
                json!([{"rank": "0-5", "children": {"core": "0"}}]),
                Some(json!(["node1[0-5]"])),
            ),
            r(
                json!([{"rank": "0-2", "children": {"core": "0"}}]),
                Some(json!(["n[8-9]", "n10"])),
            ),
            r(
                json!([{"rank": "0-2", "children": {"core": "0"}}]),
                Some(json!(["a[1]b[2]", "x[01-02]y"])),
            ),
            r(
                json!([{"rank": "2,7", "children": {"core": "0"}},
                       {"rank": "0", "children": {"core": "1"}}]),
                Some(json!(["c", "a", "b"])),
            ),
            // merged ranks: the parser decides
            r(
                json!([{"rank": "0-1", "children": {"core": "0"}},
                       {"rank": "1", "children": {"gpu": "0"}}]),
                Some(json!(["a[0-1]"])),
            ),
            r(
                json!([{"rank": "0-1", "children": {"core": "0"}},
                       {"rank": "1", "children": {"core": "0"}}]),
                None,
            ),
            // errors
            r(
                json!([{"rank": "0-1", "children": {"core": "0"}}]),
                Some(json!(["a"])),
            ),
            r(
                json!([{"rank": "0", "children": {"core": "0"}}]),
                Some(json!(["a", "b"])),
            ),
            r(json!([{"rank": "x", "children": {}}]), None),
            r(json!([{"rank": "0", "children": {"core": 1}}]), None),
            r(json!([{"rank": "0"}]), None),
            r(
                json!([{"rank": "0", "children": {"core": "0"}}]),
                Some(json!(["a["])),
            ),
            r(json!({}), Some(json!([]))),
            r(json!([{"rank": "", "children": {"core": "0"}}]), None),
            json!({"version": 2, "execution": {"R_lite": []}}),
            json!({"version": 1.0, "execution": {"R_lite": []}}),
            json!({"version": 1}),
            json!({"version": 1, "execution": {"R_lite": [], "nslots": 1.5}}),
            json!({"version": 1, "execution": {"R_lite": [], "starttime": "x"}}),
            json!([]),
        ];
        for v in &cases {
            same(v);
        }
        // the plain ones did not need the parser
        for v in cases.iter().take(6) {
            assert!(summarize(v).is_some(), "{v}");
        }
        let mut props = r(
            json!([{"rank": "0-3", "children": {"core": "0"}}]),
            Some(json!(["a[0-3]"])),
        );
        for p in [
            json!({"big": "0-1", "small": "3"}),
            json!({"big": "0-4"}),
            json!({"b|d": "0"}),
            json!({"big": 1}),
            json!({"big": "x"}),
            json!([]),
        ] {
            if let Some(e) = props.get_mut("execution").and_then(Value::as_object_mut) {
                e.insert("properties".into(), p);
            }
            same(&props);
        }
    }
}
