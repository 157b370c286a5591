//! `[[resource.config]]` → R (flux-core's `rlist_from_config`).

use crate::error::RError;
use crate::json::{self, type_name};
use crate::node::Node;
use crate::rset::{invalid_property_char, Rset};
use crate::zhash::{core_name, gpu_name, Name};
use crate::{MAX_ITEMS, MAX_NODES};
use hostlist::Hostlist;
use idset::IdSet;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

fn err(s: impl Into<String>) -> RError {
    RError::msg(s)
}

/// The fields of one entry: hosts, cores, gpus, properties.
type Entry<'a> = (&'a str, Option<&'a str>, Option<&'a str>, Option<&'a Value>);

/// Unpack one entry strictly: `{s:s s?s s?s s?o !}`.
fn unpack_entry(entry: &Value) -> Result<Entry<'_>, String> {
    let Value::Object(m) = entry else {
        return Err(format!("Expected object, got {}", type_name(entry)));
    };
    let string = |key: &str, required: bool| -> Result<Option<&str>, String> {
        match m.get(key) {
            None if required => Err(format!("Object item not found: {key}")),
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.as_str())),
            Some(other) => Err(format!("Expected string, got {}", type_name(other))),
        }
    };
    let hosts = string("hosts", true)?.unwrap_or_default();
    let cores = string("cores", false)?;
    let gpus = string("gpus", false)?;
    let properties = m.get("properties");
    let known = ["hosts", "cores", "gpus", "properties"];
    let extra: Vec<&str> = m
        .keys()
        .map(String::as_str)
        .filter(|k| !known.contains(k))
        .collect();
    if !extra.is_empty() {
        return Err(format!(
            "{} object item(s) left unpacked: {}",
            extra.len(),
            extra.join(", ")
        ));
    }
    Ok((hosts, cores, gpus, properties))
}

impl Rset {
    /// Build R from the `resource.config` array (TOML converted to JSON),
    /// as flux-core's `rlist_from_config`.
    ///
    /// Each entry has `hosts` (a hostlist, required) and optional `cores`
    /// and `gpus` (idsets) and `properties` (array of strings).  A host gets
    /// the next rank the first time it appears; repeated hosts merge
    /// (overlapping ids fail).  Every host must end up with some resource.
    pub fn from_config(conf: &Value) -> Result<Rset, RError> {
        let Value::Array(entries) = conf else {
            return Err(err("resource config must be an array"));
        };
        let mut rl = Rset::new();
        let mut hostmap: HashMap<String, u32> = HashMap::new();
        let mut items = 0u64;
        for (index, entry) in entries.iter().enumerate() {
            let (hosts, cores, gpus, properties) =
                unpack_entry(entry).map_err(|e| err(format!("config[{index}]: {e}")))?;
            let props = match properties {
                None => None,
                Some(Value::Array(a)) => Some(a),
                Some(_) => {
                    return Err(err(format!("config[{index}]: properties must be an array")));
                }
            };
            let hl = Hostlist::decode(hosts)
                .map_err(|_| err(format!("config[{index}]: invalid hostlist '{hosts}'")))?;
            if hl.is_empty() {
                return Err(err(format!("config[{index}]: empty hostlist specified")));
            }
            let coreids = match cores {
                Some(c) => Some(Arc::new(IdSet::parse(c).map_err(|_| {
                    err(format!("config[{index}]: invalid idset cores='{c}'"))
                })?)),
                None => None,
            };
            let gpuids = match gpus {
                Some(g) => Some(Arc::new(IdSet::parse(g).map_err(|_| {
                    err(format!("config[{index}]: invalid idset gpus='{g}'"))
                })?)),
                None => None,
            };
            let mut pnames: Vec<Name> = Vec::new();
            if let Some(a) = props {
                for p in a {
                    match p {
                        Value::String(s)
                            if invalid_property_char(s, crate::PROPERTY_INVALID).is_none() =>
                        {
                            pnames.push(Name::new(s));
                        }
                        other => {
                            return Err(err(format!(
                                "config[{index}]: invalid property \"{}\"",
                                json::dumps(other)
                            )));
                        }
                    }
                }
            }
            if hl.len() > MAX_NODES {
                return Err(RError::TooManyNodes);
            }
            items = items.saturating_add((hl.len() as u64).saturating_mul(1 + pnames.len() as u64));
            if items > MAX_ITEMS {
                return Err(RError::TooLarge);
            }
            for host in hl.iter() {
                let next = hostmap.len() as u32;
                let rank = *hostmap.entry(host.clone()).or_insert(next);
                let mut n = Node::new(Some(Arc::from(host)), rank);
                if let Some(c) = &coreids {
                    let _ = n.add_child(core_name(), c);
                }
                if let Some(g) = &gpuids {
                    let _ = n.add_child(gpu_name(), g);
                }
                for p in &pnames {
                    n.set_property(p);
                }
                match rl.add_node(n) {
                    Ok(()) => {}
                    Err(RError::TooManyNodes) => return Err(RError::TooManyNodes),
                    Err(_) => return Err(err("Unable to add rnode: File exists")),
                }
            }
        }
        if rl.nodes.is_empty() {
            return Err(err("no hosts configured"));
        }
        let empty: Hostlist = rl
            .nodes
            .iter()
            .filter(|n| n.total() == 0)
            .filter_map(|n| n.hostname.as_deref())
            .collect();
        if !empty.is_empty() {
            return Err(err(format!(
                "resource.config: {} assigned no resources",
                empty.encode()
            )));
        }
        Ok(rl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conf(s: &str) -> Result<Rset, String> {
        let v = json::loads(s.as_bytes()).map_err(|e| e.text)?;
        Rset::from_config(&v).map_err(|e| e.to_string())
    }

    #[test]
    fn error_texts() {
        assert_eq!(
            conf("{}").err().unwrap_or_default(),
            "resource config must be an array"
        );
        assert_eq!(conf("[]").err().unwrap_or_default(), "no hosts configured");
        assert_eq!(
            conf(
                r#"[{"hosts":"foo[0-10]","cores":"0-1"},{"hosts":"foo11","cores":"0-3","junk":5}]"#
            )
            .err()
            .unwrap_or_default(),
            "config[1]: 1 object item(s) left unpacked: junk"
        );
        assert_eq!(
            conf(r#"[{"cores":"0-1"}]"#).err().unwrap_or_default(),
            "config[0]: Object item not found: hosts"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo","properties":"x"}]"#)
                .err()
                .unwrap_or_default(),
            "config[0]: properties must be an array"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo[p]","cores":"0"}]"#)
                .err()
                .unwrap_or_default(),
            "config[0]: invalid hostlist 'foo[p]'"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo","cores":"0"},{"hosts":"","cores":"0-3"}]"#)
                .err()
                .unwrap_or_default(),
            "config[1]: empty hostlist specified"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo0","cores":"0-"}]"#)
                .err()
                .unwrap_or_default(),
            "config[0]: invalid idset cores='0-'"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo0","gpus":"2,1"}]"#)
                .err()
                .unwrap_or_default(),
            "config[0]: invalid idset gpus='2,1'"
        );
        assert_eq!(
            conf(
                r#"[{"hosts":"foo[0-10]","cores":"0-1"},{"hosts":"foo1","properties":["de^bug"]}]"#
            )
            .err()
            .unwrap_or_default(),
            "config[1]: invalid property \"\"de^bug\"\""
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo[0-10]","cores":"0-1"},{"hosts":"foo1","properties":[1]}]"#)
                .err()
                .unwrap_or_default(),
            "config[1]: invalid property \"1\""
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo[0-10]","cores":"0-1"},{"hosts":"foo11"}]"#)
                .err()
                .unwrap_or_default(),
            "resource.config: foo11 assigned no resources"
        );
        assert_eq!(
            conf(r#"[{"hosts":"foo[0-1]","cores":"0-1"},{"hosts":"foo1","cores":"1"}]"#)
                .err()
                .unwrap_or_default(),
            "Unable to add rnode: File exists"
        );
    }

    #[test]
    fn rank_assignment_and_merging() {
        let rl = conf(
            r#"[{"hosts":"foo[0-2]","cores":"0-1"},{"hosts":"foo2","gpus":"0"},{"hosts":"foo0","properties":["login"]}]"#,
        )
        .unwrap_or_default();
        assert_eq!(rl.nnodes(), 3);
        assert_eq!(rl.count("core"), 6);
        assert_eq!(rl.count("gpu"), 1);
        assert_eq!(
            rl.nodelist().map(|h| h.encode()).unwrap_or_default(),
            "foo[0-2]"
        );
        assert_eq!(rl.property_ranks("login").encode(), "0");
        let rl =
            conf(r#"[{"hosts":"b,a","cores":"0"},{"hosts":"a,c","gpus":"0"}]"#).unwrap_or_default();
        assert_eq!(rl.hostname(0), Some("b"));
        assert_eq!(rl.hostname(1), Some("a"));
        assert_eq!(rl.hostname(2), Some("c"));
        assert_eq!(rl.dumps(), "rank0/core0 rank1/core0,gpu0 rank2/gpu0");
    }

    #[test]
    fn t2315_example() {
        let rl = conf(
            r#"[{"hosts":"foo[0-10]","cores":"0-3"},{"hosts":"foo[9,10]","gpus":"0-1"},
               {"hosts":"foo[0-2]","properties":["debug"]},{"hosts":"foo[3-10]","properties":["batch"]}]"#,
        )
        .unwrap_or_default();
        assert_eq!(rl.property_ranks("debug").encode(), "0-2");
        assert_eq!(rl.property_ranks("batch").encode(), "3-10");
        assert_eq!(rl.count("gpu"), 4);
    }
}
