//! Reading flux configuration (TOML) as JSON, like `flux_conf_parse()`
//! (what `roster R parse-config` reads; `roster serve` reads its own
//! configuration with [`crate::Config`], whose merge refuses duplicates).
//!
//! A directory path reads every `*.toml` file in it (sorted by name) and
//! merges them recursively; a file path reads that file (as JSON if it ends
//! in `.json`, else TOML).  TOML tables become JSON objects with their keys
//! in file order, integers stay integers, floats become reals, and dates
//! become strings.
//!
//! Error texts follow flux-core's framing (`stat: PATH: <strerror>`,
//! `FILE:LINE: <message>`); the message part of a TOML syntax error comes
//! from the `toml` crate and differs from flux-core's tomlc99 wording.

use crate::load::{io_text, line_of};
use serde_json::{Map, Number, Value};
use std::path::Path;

/// Convert a TOML value to JSON.
pub fn toml_to_json(v: &toml::Value) -> Value {
    match v {
        toml::Value::String(s) => Value::String(s.clone()),
        toml::Value::Integer(i) => Value::Number(Number::from(*i)),
        toml::Value::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
        toml::Value::Boolean(b) => Value::Bool(*b),
        toml::Value::Datetime(d) => Value::String(d.to_string()),
        toml::Value::Array(a) => Value::Array(a.iter().map(toml_to_json).collect()),
        toml::Value::Table(t) => {
            let mut m = Map::new();
            for (k, v) in t {
                m.insert(k.clone(), toml_to_json(v));
            }
            Value::Object(m)
        }
    }
}

/// `json_object_update_recursive`.
fn merge(into: &mut Map<String, Value>, from: Map<String, Value>) {
    for (k, v) in from {
        match (into.get_mut(&k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => merge(a, b),
            (_, v) => {
                into.insert(k, v);
            }
        }
    }
}

fn parse_toml_file(path: &Path) -> Result<Map<String, Value>, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {}", io_text(&e)))?;
    match text.parse::<toml::Table>() {
        Ok(t) => match toml_to_json(&toml::Value::Table(t)) {
            Value::Object(m) => Ok(m),
            _ => Ok(Map::new()),
        },
        Err(e) => {
            let msg = e.message().trim_end().to_string();
            match e.span() {
                Some(sp) => Err(format!("{name}:{}: {msg}", line_of(&text, sp.start))),
                None => Err(format!("{name}: {msg}")),
            }
        }
    }
}

fn parse_json_file(path: &Path) -> Result<Map<String, Value>, String> {
    let name = path.display();
    let bytes = std::fs::read(path)
        .map_err(|e| format!("{name}:-1: unable to open {name}: {}", io_text(&e)))?;
    match rset::json::loads(&bytes) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Ok(Map::new()),
        Err(e) => Err(format!("{name}:{}: {}", e.line, e.text)),
    }
}

/// Parse a config file or directory (`flux_conf_parse`) into a JSON object.
pub fn parse_path(path: &Path) -> Result<Value, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("stat: {}: {}", path.display(), io_text(&e)))?;
    let mut conf = Map::new();
    if meta.is_dir() {
        let rd =
            std::fs::read_dir(path).map_err(|e| format!("{}: {}", path.display(), io_text(&e)))?;
        let mut files: Vec<std::path::PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.ends_with(".toml") && !n.starts_with('.'))
            })
            .collect();
        files.sort_by(|a, b| {
            a.as_os_str()
                .as_encoded_bytes()
                .cmp(b.as_os_str().as_encoded_bytes())
        });
        for f in files {
            merge(&mut conf, parse_toml_file(&f)?);
        }
    } else if path.extension().and_then(|e| e.to_str()) == Some("json") {
        merge(&mut conf, parse_json_file(path)?);
    } else {
        merge(&mut conf, parse_toml_file(path)?);
    }
    Ok(Value::Object(conf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_conversion_keeps_key_order_and_types() {
        let t: toml::Table = "[resource]\nz = 1\na = 2.5\n[[resource.config]]\nhosts = \"foo\"\n"
            .parse()
            .unwrap_or_default();
        let v = toml_to_json(&toml::Value::Table(t));
        assert_eq!(
            rset::json::dumps(&v),
            r#"{"resource": {"z": 1, "a": 2.5, "config": [{"hosts": "foo"}]}}"#
        );
    }

    #[test]
    fn recursive_merge() {
        let mut a = Map::new();
        a.insert("r".into(), serde_json::json!({"x": 1, "y": {"p": 1}}));
        let mut b = Map::new();
        b.insert("r".into(), serde_json::json!({"y": {"q": 2}, "z": 3}));
        merge(&mut a, b);
        assert_eq!(
            rset::json::dumps(&Value::Object(a)),
            r#"{"r": {"x": 1, "y": {"p": 1, "q": 2}, "z": 3}}"#
        );
    }

    #[test]
    fn missing_path() {
        let e = parse_path(Path::new("/nonexistent/roster-conf"))
            .err()
            .unwrap_or_default();
        assert_eq!(
            e,
            "stat: /nonexistent/roster-conf: No such file or directory"
        );
    }
}
