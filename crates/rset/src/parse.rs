//! R JSON → [`Rset`] (flux-core's `rlist_from_json`).

use crate::error::RError;
use crate::json::{self, integer_value, is_integer, number_value, type_name};
use crate::node::Node;
use crate::rset::Rset;
use crate::zhash::Name;
use crate::{MAX_ITEMS, MAX_NODES};
use hostlist::Hostlist;
use idset::IdSet;
use serde_json::{Map, Value};
use std::sync::Arc;

fn expect_object(v: &Value) -> Result<&Map<String, Value>, RError> {
    match v {
        Value::Object(m) => Ok(m),
        other => Err(RError::unpack(format!(
            "Expected object, got {}",
            type_name(other)
        ))),
    }
}

fn required<'a>(m: &'a Map<String, Value>, key: &str) -> Result<&'a Value, RError> {
    m.get(key)
        .ok_or_else(|| RError::unpack(format!("Object item not found: {key}")))
}

fn expect_integer(v: &Value) -> Result<i64, RError> {
    if is_integer(v) {
        Ok(integer_value(v))
    } else {
        Err(RError::unpack(format!(
            "Expected integer, got {}",
            type_name(v)
        )))
    }
}

fn expect_number(v: &Value) -> Result<f64, RError> {
    if matches!(v, Value::Number(_)) {
        Ok(number_value(v))
    } else {
        Err(RError::unpack(format!(
            "Expected real or integer, got {}",
            type_name(v)
        )))
    }
}

fn expect_str(v: &Value) -> Result<&str, RError> {
    match v {
        Value::String(s) => Ok(s),
        other => Err(RError::unpack(format!(
            "Expected string, got {}",
            type_name(other)
        ))),
    }
}

/// Children of one R_lite entry, parsed once and shared by its ranks.
pub(crate) fn parse_children(
    children: &Value,
    rank: u32,
) -> Result<Vec<(Name, Arc<IdSet>)>, RError> {
    let mut out = Vec::new();
    // A non-object `children` yields nodes with only an empty core.
    if let Value::Object(m) = children {
        for (key, val) in m {
            let ids = match val {
                Value::String(s) => IdSet::parse(s).ok(),
                _ => None,
            };
            let Some(ids) = ids else {
                return Err(RError::Child {
                    rank,
                    name: key.clone(),
                    value: crate::error::short(json::dumps(val)),
                });
            };
            out.push((Name::new(key), Arc::new(ids)));
        }
    }
    Ok(out)
}

/// RFC 20's sentence on `expiration` (checked when both times are set,
/// i.e. positive: flux-core writes 0 for an unset time).
pub const EXPIRATION_RULE: &str =
    "If starttime is also set, expiration MUST be greater than starttime.";

impl Rset {
    /// Parse an R object (`rlist_from_json`), with flux-core's validation
    /// and error texts.
    ///
    /// Required: `version` (an integer equal to 1) and `execution.R_lite`
    /// (an array: RFC 20's "strict list"; flux-core takes anything else,
    /// e.g. `{}`, as empty).  Optional:
    /// `scheduling` (kept verbatim), `execution.nodelist` (array of
    /// hostlists, concatenated; the host count must equal the node count;
    /// hosts go to nodes in ascending rank order), `execution.properties`,
    /// `nslots` (kept if > 0), `starttime` and `expiration` (kept if > 0;
    /// when both are, `expiration` must be greater, as RFC 20 says and
    /// flux-core does not check).
    /// A rank listed in several entries merges their children; overlapping
    /// ids fail.
    ///
    /// Resource limit: more than [`MAX_NODES`] nodes fail with
    /// [`RError::TooManyNodes`] instead of exhausting memory.
    pub fn from_json(o: &Value) -> Result<Rset, RError> {
        Rset::from_json_limited(o, MAX_NODES, MAX_ITEMS)
    }

    /// [`Rset::from_json`] with tighter resource limits: at most
    /// `max_nodes` nodes (capped at [`MAX_NODES`]) and `max_items` child
    /// entries (capped at [`MAX_ITEMS`]).  Useful for fuzzing, where a
    /// few bytes (`"rank": "0-1048575"`) can otherwise describe a million
    /// nodes.
    pub fn from_json_limited(o: &Value, max_nodes: usize, max_items: u64) -> Result<Rset, RError> {
        let limits = (max_nodes.min(MAX_NODES), max_items.min(MAX_ITEMS));
        let top = expect_object(o)?;
        let version = expect_integer(required(top, "version")?)? as i32;
        let scheduling = top.get("scheduling");
        let exec = expect_object(required(top, "execution")?)?;
        let r_lite = required(exec, "R_lite")?;
        let nodelist = exec.get("nodelist");
        let properties = exec.get("properties");
        let nslots = match exec.get("nslots") {
            Some(v) => expect_integer(v)? as i32,
            None => -1,
        };
        let starttime = match exec.get("starttime") {
            Some(v) => expect_number(v)?,
            None => -1.0,
        };
        let expiration = match exec.get("expiration") {
            Some(v) => expect_number(v)?,
            None => -1.0,
        };
        if version != 1 {
            return Err(RError::Version(version));
        }
        if !r_lite.is_array() {
            return Err(RError::rfc20(
                "execution.R_lite",
                r_lite,
                "R_lite is a strict list of dictionaries",
            ));
        }
        if starttime > 0.0 && expiration > 0.0 && expiration <= starttime {
            return Err(RError::rfc20(
                "execution.expiration",
                exec.get("expiration").unwrap_or(&Value::Null),
                EXPIRATION_RULE,
            ));
        }
        let mut rl = Rset::new();
        rl.scheduling = scheduling.cloned();
        rl.attributes = top.get("attributes").cloned();
        if nslots > 0 {
            rl.nslots = nslots;
        }
        if starttime > 0.0 {
            rl.starttime = starttime;
        }
        if expiration > 0.0 {
            rl.expiration = expiration;
        }
        if let Value::Array(entries) = r_lite {
            // Reserve for the nodes the entries describe (bounded).
            let hint: u64 = entries
                .iter()
                .filter_map(|e| e.get("rank")?.as_str())
                .filter_map(|r| IdSet::parse(r).ok())
                .map(|r| r.len())
                .sum();
            rl.nodes.reserve(hint.min(limits.0 as u64) as usize);
            let mut items = 0u64;
            for entry in entries {
                rl.append_entry(entry, &mut items, limits)?;
            }
        }
        if let Some(nl) = nodelist {
            rl.assign_nodelist(nl)?;
        }
        if let Some(p) = properties {
            rl.assign_properties(p)?;
        }
        Ok(rl)
    }

    /// Parse R from JSON text (`rlist_from_R`): the text must hold exactly
    /// one JSON object.  Never panics; see [`Rset::from_json`].
    pub fn from_json_str(s: &str) -> Result<Rset, RError> {
        Rset::from_json_bytes(s.as_bytes())
    }

    /// Like [`Rset::from_json_str`] for raw bytes (invalid UTF-8 fails
    /// with jansson's error text).
    pub fn from_json_bytes(s: &[u8]) -> Result<Rset, RError> {
        Rset::from_json_bytes_limited(s, MAX_NODES, MAX_ITEMS)
    }

    /// [`Rset::from_json_bytes`] with the limits of [`Rset::from_json_limited`].
    pub fn from_json_bytes_limited(
        s: &[u8],
        max_nodes: usize,
        max_items: u64,
    ) -> Result<Rset, RError> {
        let v = json::loads(s).map_err(|e| RError::Json {
            text: e.text,
            line: e.line,
        })?;
        Rset::from_json_limited(&v, max_nodes, max_items)
    }

    fn append_entry(
        &mut self,
        entry: &Value,
        items: &mut u64,
        (max_nodes, max_items): (usize, u64),
    ) -> Result<(), RError> {
        let m = expect_object(entry)?;
        let ranks = expect_str(required(m, "rank")?)?;
        let children = required(m, "children")?;
        let ranks = IdSet::parse(ranks)
            .map_err(|_| RError::Ranks(crate::error::short(ranks.to_string())))?;
        if ranks.is_empty() {
            return Ok(());
        }
        if self.nodes.len() as u64 + ranks.len() > max_nodes as u64 {
            // Ranks may merge into existing nodes; count those precisely
            // (iterating the existing nodes, never the possibly huge idset).
            let existing = self.nodes.iter().filter(|n| ranks.contains(n.rank)).count() as u64;
            if self.nodes.len() as u64 + ranks.len() - existing > max_nodes as u64 {
                return Err(RError::TooManyNodes);
            }
        }
        let first = ranks.first().unwrap_or(0);
        let kids = parse_children(children, first)?;
        *items = items.saturating_add(ranks.len().saturating_mul(kids.len().max(1) as u64));
        if *items > max_items {
            return Err(RError::TooLarge);
        }
        // Every rank of the entry starts as the same node: build it once
        // (an overlap among the children fails on the first rank).
        let mut template = Node::new(None, first);
        for (name, ids) in &kids {
            template.add_child(name, ids).map_err(|o| o.at(first))?;
        }
        for rank in ranks.iter() {
            let mut n = template.clone();
            n.rank = rank;
            self.add_node(n)?;
        }
        Ok(())
    }

    fn assign_nodelist(&mut self, nodelist: &Value) -> Result<(), RError> {
        let mut hl = Hostlist::new();
        if let Value::Array(items) = nodelist {
            for item in items {
                // Non-string entries are skipped, as hostlist_append (NULL).
                if let Value::String(s) = item {
                    let part = Hostlist::decode(s)
                        .map_err(|e| RError::Nodelist(format!("execution.nodelist: {e}")))?;
                    if hl.len() + part.len() > self.nodes.len() {
                        return Err(RError::Nodelist(format!(
                            "nodelist has more hosts than R has nodes ({})",
                            self.nodes.len()
                        )));
                    }
                    hl.append(&part);
                }
            }
        }
        self.assign_hostlist(&hl)
    }
}
