//! Named output formats (`flux-resource.toml`, built-ins, the
//! `*_FORMAT_DEFAULT` environment variables, `-o help`, `-o get-config=`),
//! as flux's `UtilConfig` / `FluxResourceConfig` implement them.

use crate::value::FieldValue;
use pycompat::error::{PyError, PyResult};
use serde_json::{Map, Value};

/// The `flux resource` subcommand whose format table is used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subcommand {
    /// `flux resource status`
    Status,
    /// `flux resource drain` (listing mode)
    Drain,
    /// `flux resource list`
    List,
}

impl Subcommand {
    /// The config table name (`status`, `drain`, `list`).
    pub fn table(self) -> &'static str {
        match self {
            Subcommand::Status => "status",
            Subcommand::Drain => "drain",
            Subcommand::List => "list",
        }
    }
}

/// Built-in `flux resource status` default format.
pub const STATUS_DEFAULT: &str = "{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} {nodelist}";
/// Built-in `flux resource status` long format.
pub const STATUS_LONG: &str =
    "{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} +:{reason:<30.30} {nodelist}";
/// Built-in drain listing long format.
pub const DRAIN_LONG: &str =
    "{timestamp!d:%b%d %R::<12} {state:<8.8} {ranks:<8.8+} +:{reason:<30.30} {nodelist}";
/// Built-in drain listing default format.
pub const DRAIN_DEFAULT: &str =
    "{timestamp!d:%b%d %R::<12} {state:<8.8} {reason:<30.30+} {nodelist}";
/// Built-in `flux resource list` default format.
pub const LIST_DEFAULT: &str = "{state:>10} ?+:{queue:<5} ?:{propertiesx:<10.10+} {nnodes:>6} +:{ncores:>6} ?+:{ngpus:>5} {nodelist}";
/// Built-in `flux resource list` rlist format (its `?:+` is not a valid
/// sentinel, so a literal `+` is printed, as in flux).
pub const LIST_RLIST: &str = "{state:>10} ?+:{queue:<5} ?:{propertiesx:<10.10+} {nnodes:>6} +:{ncores:>6} ?:+{ngpus:>5} {rlist}";
/// The fixed `flux resource info` format.
pub const INFO_FORMAT: &str = "{nnodes} Nodes, {ncores} Cores, {ngpus} GPUs";

fn entry(desc: &str, fmt: &str) -> Value {
    let mut m = Map::new();
    m.insert("description".into(), Value::String(desc.into()));
    m.insert("format".into(), Value::String(fmt.into()));
    Value::Object(m)
}

/// The built-in format tables (`builtin_formats` in flux-resource.py).
fn builtins() -> Value {
    let mut status = Map::new();
    status.insert(
        "default".into(),
        entry("Default flux-resource status format string", STATUS_DEFAULT),
    );
    status.insert(
        "long".into(),
        entry("Long flux-resource status format string", STATUS_LONG),
    );
    let mut drain = Map::new();
    drain.insert(
        "long".into(),
        entry("Long flux-resource drain format string", DRAIN_LONG),
    );
    drain.insert(
        "default".into(),
        entry("Default flux-resource drain format string", DRAIN_DEFAULT),
    );
    let mut list = Map::new();
    list.insert(
        "default".into(),
        entry("Default flux-resource list format string", LIST_DEFAULT),
    );
    list.insert(
        "rlist".into(),
        entry("Format including resource list details", LIST_RLIST),
    );
    let mut top = Map::new();
    for (k, v) in [("status", status), ("drain", drain), ("list", list)] {
        let mut t = Map::new();
        t.insert("formats".into(), Value::Object(v));
        top.insert(k.into(), Value::Object(t));
    }
    Value::Object(top)
}

/// What a `--format` argument resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FormatChoice {
    /// A format string to use.
    Format(String),
    /// `help` or `get-config=NAME`: print this to stdout and exit 0.
    Print(String),
}

/// Environment lookups (the caller decides where values come from).
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// An environment with no variables set.
pub fn no_env(_: &str) -> Option<String> {
    None
}

fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) => {
            if n.is_f64() {
                "float"
            } else {
                "int"
            }
        }
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// `dict_merge(src, new)`: recursive merge, `new` wins on conflicts.
fn dict_merge(src: &mut Map<String, Value>, new: &Map<String, Value>) {
    for (k, v) in new {
        match (src.get_mut(k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => dict_merge(a, b),
            (Some(slot), _) => *slot = v.clone(),
            (None, _) => {
                src.insert(k.clone(), v.clone());
            }
        }
    }
}

/// The `flux-resource` configuration for one subcommand.
#[derive(Debug, Clone)]
pub struct FormatConfig {
    name: String,
    sub: Subcommand,
    dict: Map<String, Value>,
}

impl FormatConfig {
    /// Built-in formats only (no user configuration files).
    pub fn new(sub: Subcommand) -> FormatConfig {
        let dict = match builtins() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        FormatConfig {
            name: "flux-resource".into(),
            sub,
            dict,
        }
    }

    /// Use another tool name in `-o help` output and environment variable
    /// names (default `flux-resource`).
    pub fn with_tool_name(mut self, name: &str) -> FormatConfig {
        self.name = name.into();
        self
    }

    /// The subcommand.
    pub fn subcommand(&self) -> Subcommand {
        self.sub
    }

    /// Validate and merge one loaded configuration file (its decoded
    /// contents, from TOML, JSON or YAML), as `UtilConfig.load()` does for
    /// each `flux-resource.*` file in XDG search order (lowest precedence
    /// first).  Errors name `path`, with flux's texts.
    pub fn merge_file(&mut self, path: &str, conf: &Value) -> PyResult<()> {
        self.validate(path, conf)?;
        if let Value::Object(m) = conf {
            dict_merge(&mut self.dict, m);
        }
        Ok(())
    }

    fn validate(&self, path: &str, conf: &Value) -> PyResult<()> {
        let Value::Object(m) = conf else {
            return Err(PyError::Attribute(format!(
                "'{}' object has no attribute 'items'",
                py_type(conf)
            )));
        };
        for (key, value) in m {
            if !["status", "list", "drain"].contains(&key.as_str()) {
                return Err(PyError::Value(format!("{path}: invalid key {key}")));
            }
            let Value::Object(sub) = value else {
                return Err(PyError::Attribute(format!(
                    "'{}' object has no attribute 'items'",
                    py_type(value)
                )));
            };
            for (key2, val2) in sub {
                if key2 == "formats" {
                    self.validate_formats(path, val2)?;
                } else {
                    return Err(PyError::Value(format!("{path}: invalid key {key}.{key2}")));
                }
            }
        }
        Ok(())
    }

    fn validate_formats(&self, path: &str, formats: &Value) -> PyResult<()> {
        let builtin = builtins();
        let names = builtin
            .get(self.sub.table())
            .and_then(|t| t.get("formats"))
            .and_then(Value::as_object);
        let Value::Object(formats) = formats else {
            return Err(PyError::Value(format!(
                "{path}: the 'formats' key must be a mapping"
            )));
        };
        for (name, entry) in formats {
            if names.is_some_and(|n| n.contains_key(name)) {
                return Err(PyError::Value(format!(
                    "{path}: override of builtin format '{name}' not permitted"
                )));
            }
            let Value::Object(e) = entry else {
                return Err(PyError::Value(format!(
                    "{path}: 'formats.{name}' must be a mapping"
                )));
            };
            match e.get("format") {
                None => {
                    return Err(PyError::Value(format!(
                        "{path}: formats.{name}: required key 'format' missing"
                    )))
                }
                Some(Value::String(_)) => {}
                Some(_) => {
                    return Err(PyError::Value(format!(
                        "{path}: formats.{name}: 'format' key must be a string"
                    )))
                }
            }
        }
        Ok(())
    }

    fn formats(&self) -> PyResult<&Map<String, Value>> {
        self.dict
            .get(self.sub.table())
            .and_then(|t| t.get("formats"))
            .and_then(Value::as_object)
            .ok_or_else(|| PyError::Key("formats".into()))
    }

    /// The environment variables consulted for `-o default`, in order:
    /// `ROSTER_RESOURCE_<SUB>_FORMAT_DEFAULT`, then the flux name
    /// (`FLUX_RESOURCE_<SUB>_FORMAT_DEFAULT`).
    pub fn default_env_names(&self) -> Vec<String> {
        let sub = self.sub.table().to_uppercase();
        let own = format!(
            "{}_{sub}_FORMAT_DEFAULT",
            self.name.to_uppercase().replace('-', "_")
        );
        let mut v = vec![format!("ROSTER_RESOURCE_{sub}_FORMAT_DEFAULT")];
        if !v.contains(&own) {
            v.push(own);
        }
        let flux = format!("FLUX_RESOURCE_{sub}_FORMAT_DEFAULT");
        if !v.contains(&flux) {
            v.push(flux);
        }
        v
    }

    /// `get_format_string(name)`: resolve a `--format` argument.
    pub fn get_format_string(&self, format_name: &str, env: Env<'_>) -> PyResult<FormatChoice> {
        if format_name.contains('{') {
            return Ok(FormatChoice::Format(format_name.to_string()));
        }
        let formats = self.formats()?;
        if format_name == "help" {
            let mut out = format!("\nConfigured {} output formats:\n\n", self.name);
            for (name, entry) in formats {
                out.push_str("  ");
                out.push_str(&pycompat::pyfmt::format_str(name, "<12", "str")?);
                match entry.get("description") {
                    Some(d) => {
                        out.push(' ');
                        out.push_str(&FieldValue::from_json(d).py_str());
                        out.push('\n');
                    }
                    None => out.push('\n'),
                }
            }
            return Ok(FormatChoice::Print(out));
        }
        if let Some(name) = format_name.strip_prefix("get-config=") {
            let entry = formats
                .get(name)
                .ok_or_else(|| PyError::Value(format!("--format: No such format {name}")))?;
            let mut out = format!("[{}.formats.{name}]\n", self.sub.table());
            if let Some(d) = entry.get("description") {
                out.push_str(&format!(
                    "description = \"{}\"\n",
                    FieldValue::from_json(d).py_str()
                ));
            }
            let f = entry
                .get("format")
                .ok_or_else(|| PyError::Key("format".into()))?;
            out.push_str(&format!(
                "format = \"{}\"\n",
                FieldValue::from_json(f).py_str()
            ));
            return Ok(FormatChoice::Print(out));
        }
        let mut name = format_name.to_string();
        if name == "default" {
            if let Some(v) = self.default_env_names().iter().find_map(|n| env(n)) {
                if v.contains('{') {
                    return Ok(FormatChoice::Format(v));
                }
                name = v;
            }
        }
        match formats.get(&name).and_then(|e| e.get("format")) {
            Some(Value::String(s)) => Ok(FormatChoice::Format(s.clone())),
            Some(other) => Ok(FormatChoice::Format(FieldValue::from_json(other).py_str())),
            None => Err(PyError::Value(format!("--format: No such format {name}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fmt(c: &FormatConfig, name: &str, env: Env<'_>) -> String {
        match c.get_format_string(name, env) {
            Ok(FormatChoice::Format(s)) => s,
            Ok(FormatChoice::Print(s)) => format!("PRINT{s}"),
            Err(e) => format!("ERR {e}"),
        }
    }

    #[test]
    fn builtin_names_and_errors() {
        let c = FormatConfig::new(Subcommand::Status);
        assert_eq!(fmt(&c, "default", &no_env), STATUS_DEFAULT);
        assert_eq!(fmt(&c, "long", &no_env), STATUS_LONG);
        assert_eq!(fmt(&c, "{x}", &no_env), "{x}");
        assert_eq!(
            fmt(&c, "invalid", &no_env),
            "ERR --format: No such format invalid"
        );
        assert_eq!(
            fmt(&c, "get-config=nope", &no_env),
            "ERR --format: No such format nope"
        );
        let d = FormatConfig::new(Subcommand::Drain);
        assert_eq!(fmt(&d, "default", &no_env), DRAIN_DEFAULT);
        let l = FormatConfig::new(Subcommand::List);
        assert_eq!(fmt(&l, "rlist", &no_env), LIST_RLIST);
    }

    #[test]
    fn help_and_get_config_text() {
        let d = FormatConfig::new(Subcommand::Drain);
        assert_eq!(
            fmt(&d, "help", &no_env),
            "PRINT\nConfigured flux-resource output formats:\n\n  long         Long flux-resource drain format string\n  default      Default flux-resource drain format string\n"
        );
        let s = FormatConfig::new(Subcommand::Status);
        assert_eq!(
            fmt(&s, "get-config=default", &no_env),
            "PRINT[status.formats.default]\ndescription = \"Default flux-resource status format string\"\nformat = \"{state:>12} {color_up}{up:>2}{color_off} {nnodes:>6} {nodelist}\"\n"
        );
    }

    #[test]
    fn env_default_overrides() {
        let l = FormatConfig::new(Subcommand::List);
        let env1 = |k: &str| {
            (k == "FLUX_RESOURCE_LIST_FORMAT_DEFAULT").then(|| "{nodelist} {nodelist}".to_string())
        };
        assert_eq!(fmt(&l, "default", &env1), "{nodelist} {nodelist}");
        let env2 =
            |k: &str| (k == "FLUX_RESOURCE_LIST_FORMAT_DEFAULT").then(|| "rlist".to_string());
        assert_eq!(fmt(&l, "default", &env2), LIST_RLIST);
        let env3 = |k: &str| match k {
            "ROSTER_RESOURCE_LIST_FORMAT_DEFAULT" => Some("{ranks}".to_string()),
            "FLUX_RESOURCE_LIST_FORMAT_DEFAULT" => Some("rlist".to_string()),
            _ => None,
        };
        assert_eq!(fmt(&l, "default", &env3), "{ranks}");
        let env4 = |_: &str| Some("bogus".to_string());
        assert_eq!(
            fmt(&l, "default", &env4),
            "ERR --format: No such format bogus"
        );
        // the environment only applies to "default"
        assert_eq!(fmt(&l, "rlist", &env1), LIST_RLIST);
    }

    #[test]
    fn user_config_files() {
        let path = "/home/u/.config/flux/flux-resource.toml";
        let conf: Value = serde_json::json!({
            "status": {"formats": {"myformat": {"description": "my status format", "format": "{nodelist}"}}},
            "list": {"formats": {"myformat": {"description": "my list format", "format": "{state:>8.8} {nodelist}"}}},
            "drain": {"formats": {"myformat": {"description": "my drain format", "format": "{state} {reason}"}}}
        });
        for sub in [Subcommand::Status, Subcommand::List, Subcommand::Drain] {
            let mut c = FormatConfig::new(sub);
            c.merge_file(path, &conf).unwrap_or_else(|e| panic!("{e}"));
            let help = fmt(&c, "help", &no_env);
            assert!(help.contains("  myformat     my "), "{help}");
            let gc = fmt(&c, "get-config=myformat", &no_env);
            assert!(
                gc.starts_with(&format!("PRINT[{}.formats.myformat]", sub.table())),
                "{gc}"
            );
            assert!(!fmt(&c, "myformat", &no_env).starts_with("ERR"));
        }
        // Bad files, merged in this order into one list and one status
        // configuration.
        let mut list = FormatConfig::new(Subcommand::List);
        let mut status = FormatConfig::new(Subcommand::Status);
        for (sub, bad, want) in [
            (
                Subcommand::List,
                json!({"list": {"formats": {"foo": "nothing"}}}),
                "'formats.foo' must be a mapping",
            ),
            (
                Subcommand::List,
                json!({"invalid": {"formats": {"foo": {"format": "nothing"}}}}),
                "invalid key invalid",
            ),
            (
                Subcommand::List,
                json!({"list": {"format": {}}}),
                "invalid key list.format",
            ),
            (
                Subcommand::Status,
                json!({"status": {"formats": {"long": {"format": "{x}"}}}}),
                "override of builtin format 'long' not permitted",
            ),
            (
                Subcommand::Status,
                json!({"status": {"formats": {"x": {"description": "d"}}}}),
                "formats.x: required key 'format' missing",
            ),
            (
                Subcommand::Status,
                json!({"status": {"formats": {"x": {"format": 1}}}}),
                "formats.x: 'format' key must be a string",
            ),
            (
                Subcommand::Status,
                json!({"status": {"formats": []}}),
                "the 'formats' key must be a mapping",
            ),
        ] {
            let c = if sub == Subcommand::List {
                &mut list
            } else {
                &mut status
            };
            let got = c.merge_file(path, &bad).err().map(|e| e.to_string());
            assert_eq!(got.unwrap_or_default(), format!("{path}: {want}"), "{bad}");
        }
    }
}
