//! Configuration errors.

/// A configuration error: what is wrong ([`ErrorKind`]) and, where known,
/// the file it was found in.
///
/// `Display` is the text `roster serve --check` prints: the file name (or
/// the origin given to [`crate::Config::from_str`]) followed by `: ` and
/// the message, e.g.
/// `/etc/flux/system/conf.d/resource.toml: [resource]: unknown key 'foo'`.
/// TOML syntax errors use the `FILE:LINE: message` form.
/// [`ConfigError::flux_text`] gives flux-core's wording of the same failure
/// where flux-core has one.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.render())]
pub struct ConfigError {
    /// The file (or origin name) the offending value came from.
    pub origin: Option<String>,
    /// What is wrong.
    pub kind: ErrorKind,
}

/// The TOML type of a value, as named in messages.
pub(crate) fn toml_type(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "float",
        toml::Value::Boolean(_) => "boolean",
        toml::Value::Datetime(_) => "datetime",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "table",
    }
}

/// jansson's name for the JSON type a TOML value becomes (flux-core
/// converts TOML to JSON before unpacking).
pub(crate) fn jansson_type(v: &toml::Value) -> &'static str {
    match v {
        toml::Value::String(_) | toml::Value::Datetime(_) => "string",
        toml::Value::Integer(_) => "integer",
        toml::Value::Float(_) => "real",
        toml::Value::Boolean(true) => "true",
        toml::Value::Boolean(false) => "false",
        toml::Value::Array(_) => "array",
        toml::Value::Table(_) => "object",
    }
}

/// What is wrong with a configuration.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ErrorKind {
    /// A file or directory could not be read (`<what>: <strerror>`).
    #[error("{0}")]
    Read(String),
    /// TOML syntax error.
    #[error("{}{message}", line.map(|l| format!("line {l}: ")).unwrap_or_default())]
    Syntax {
        /// 1-based line, when known.
        line: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// Two files of a configuration directory define the same key.
    #[error("{key}: already defined in {first}")]
    Duplicate {
        /// Dotted key, e.g. `resource.path`.
        key: String,
        /// The file that defined it first.
        first: String,
    },
    /// A top-level table Roster does not know.
    #[error("unknown table [{0}]")]
    UnknownTable(String),
    /// A known table name bound to something other than a table.
    #[error("{name} must be a table, got {got}")]
    NotATable {
        /// The table name.
        name: String,
        /// The TOML type found.
        got: &'static str,
        /// jansson's name of the type found (for [`ConfigError::flux_text`]).
        jansson_got: &'static str,
    },
    /// A top-level key that is not a table.
    #[error("unknown top-level key '{0}'")]
    UnknownTopKey(String),
    /// Keys a table does not allow (all of them, in file order).
    #[error("[{table}]: unknown key{} {}", if keys.len() == 1 { "" } else { "s" }, quote_list(keys))]
    UnknownKeys {
        /// The table, e.g. `resource`.
        table: String,
        /// The offending keys.
        keys: Vec<String>,
    },
    /// A value of the wrong type.
    #[error("[{table}]: {key} must be {expected}, got {got}")]
    Type {
        /// The table, e.g. `resource`.
        table: String,
        /// The key (or `key[N]` for an array element).
        key: String,
        /// What was expected, with its article ("an integer").
        expected: &'static str,
        /// The TOML type found.
        got: &'static str,
        /// jansson's name of the type found (for [`ConfigError::flux_text`]).
        jansson_got: &'static str,
    },
    /// `history` is not a valid duration (flux-core: "invalid history time").
    #[error("[resource]: invalid history time '{0}'")]
    History(String),
    /// A Roster duration key is not a valid duration.
    #[error("[resource]: invalid {key} duration '{value}': {reason}")]
    Duration {
        /// The key.
        key: &'static str,
        /// The value.
        value: String,
        /// Why.
        reason: crate::FsdError,
    },
    /// The `verify` value is invalid (the message is flux-core's).
    #[error("[resource]: {0}")]
    Verify(String),
    /// Another invalid value (message names key and value).
    #[error("[{table}]: {message}")]
    Invalid {
        /// The table.
        table: String,
        /// The message.
        message: String,
    },
    /// `[[resource.config]]` could not be turned into R (flux-core's text).
    #[error("error parsing [resource.config] array: {0}")]
    ConfigArray(String),
    /// `resource.path` could not be loaded as JSON (flux-core's text).
    #[error("{path}: {text}{}", on_line(*line))]
    PathLoad {
        /// The path as configured.
        path: String,
        /// jansson's text.
        text: String,
        /// jansson's line (-1 if none: then not shown).
        line: i32,
    },
    /// The JSON at `resource.path` is not a valid R (flux-core's text).
    #[error("error parsing R: {0}")]
    ParseR(String),
    /// `scheduling` without `path` or `config`.
    #[error("resource.scheduling requires resource.path or [resource.config]")]
    SchedulingWithoutR,
    /// The R object is not a JSON object, so it cannot take a
    /// `scheduling` key (flux-core's text).
    #[error("failed to set scheduling key in R")]
    SchedulingSet,
    /// The `scheduling` file could not be loaded as JSON (flux-core's text).
    #[error("error loading resource.scheduling: {text}{}", on_line(*line))]
    SchedulingLoad {
        /// jansson's text.
        text: String,
        /// jansson's line (-1 if none: then not shown).
        line: i32,
    },
}

fn quote_list(keys: &[String]) -> String {
    keys.iter()
        .map(|k| format!("'{k}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl ConfigError {
    pub(crate) fn new(origin: Option<&str>, kind: ErrorKind) -> ConfigError {
        ConfigError {
            origin: origin.map(str::to_string),
            kind,
        }
    }

    fn render(&self) -> String {
        match (&self.origin, &self.kind) {
            (
                Some(o),
                ErrorKind::Syntax {
                    line: Some(l),
                    message,
                },
            ) => {
                format!("{o}:{l}: {message}")
            }
            (Some(o), k) => format!("{o}: {k}"),
            (None, k) => k.to_string(),
        }
    }

    /// The message flux-core's resource module would give for the same
    /// failure (its `parse_config()` error text), where it has one;
    /// otherwise the message without the file name.
    ///
    /// * wrong types in `[resource]`: `error parsing [resource]
    ///   configuration: Expected integer, got string` (jansson wording);
    /// * unknown keys: `error parsing [resource] configuration: 2 object
    ///   item(s) left unpacked: foo, bar`;
    /// * `config` that is not an array: `error parsing [resource.config]
    ///   array: resource config must be an array`;
    /// * `history`: `invalid history time`.
    pub fn flux_text(&self) -> String {
        match &self.kind {
            ErrorKind::UnknownKeys { table, keys } if table == "resource" => format!(
                "error parsing [resource] configuration: {} object item(s) left unpacked: {}",
                keys.len(),
                keys.join(", ")
            ),
            ErrorKind::Type {
                table,
                key,
                expected,
                jansson_got,
                ..
            } if table == "resource" => {
                if key == "config" {
                    "error parsing [resource.config] array: resource config must be an array"
                        .to_string()
                } else {
                    let want = match *expected {
                        "an integer" => "integer",
                        "a boolean" => "true or false",
                        "a table" => "object",
                        _ => "string",
                    };
                    format!(
                        "error parsing [resource] configuration: Expected {want}, got {jansson_got}"
                    )
                }
            }
            ErrorKind::NotATable {
                name, jansson_got, ..
            } if name == "resource" => format!(
                "error parsing [resource] configuration: Expected object, got {jansson_got}"
            ),
            ErrorKind::History(_) => "invalid history time".to_string(),
            ErrorKind::Verify(m) => m.clone(),
            k => k.to_string(),
        }
    }
}

/// jansson's ` on line N` after a JSON error, when there is a line (a
/// file that cannot be opened has none: jansson says -1, which helps
/// nobody).
fn on_line(line: i32) -> String {
    if line < 0 {
        String::new()
    } else {
        format!(" on line {line}")
    }
}
