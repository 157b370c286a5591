//! Field values as Python sees them, and the objects being formatted.

use pycompat::error::{PyError, PyResult};
use pycompat::pyfmt::{format_float, format_int, format_str};
use pycompat::repr::{float_repr, py_repr_json, repr_str};
use pycompat::time::LocalDateTime;
use serde_json::Value;
use std::cmp::Ordering;

/// A value produced by a field lookup (`getattr(item, name)`).
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue {
    /// A Python `str`.
    Str(String),
    /// A Python `int`.
    Int(i64),
    /// A Python `float`.
    Float(f64),
    /// A Python `bool`.
    Bool(bool),
    /// `None`.
    None,
    /// `flux.util.AltField`: formats as `default`; `.ascii` gives `ascii`.
    Alt {
        /// The default (unicode) text.
        default: String,
        /// The `.ascii` text.
        ascii: String,
    },
    /// An object without `__format__` support (`IDset`, `Hostlist`, a
    /// `dict`, ...): `str()` gives `text`, `repr()` gives `repr`, and any
    /// non-empty format spec is a `TypeError`.
    Object {
        /// Python type name, used in error messages.
        type_name: String,
        /// `str(obj)`.
        text: String,
        /// `repr(obj)`.
        repr: String,
        /// `bool(obj)`.
        truthy: bool,
    },
    /// A `flux.util.UtilDatetime` (result of the `!d` conversion).
    DateTime(LocalDateTime),
}

impl FieldValue {
    /// Convenience constructor for strings.
    pub fn str(s: impl Into<String>) -> FieldValue {
        FieldValue::Str(s.into())
    }

    /// The value Python would hold after `json.loads` of `v`.
    pub fn from_json(v: &Value) -> FieldValue {
        match v {
            Value::Null => FieldValue::None,
            Value::Bool(b) => FieldValue::Bool(*b),
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    FieldValue::Int(i)
                } else if let Some(f) = n.as_f64() {
                    if n.is_u64() {
                        // Larger than i64: Python keeps an exact int; we keep
                        // the float value but print it as an integer.
                        FieldValue::Object {
                            type_name: "int".into(),
                            text: n.to_string(),
                            repr: n.to_string(),
                            truthy: true,
                        }
                    } else {
                        FieldValue::Float(f)
                    }
                } else {
                    FieldValue::None
                }
            }
            Value::String(s) => FieldValue::Str(s.clone()),
            Value::Array(a) => FieldValue::Object {
                type_name: "list".into(),
                text: py_repr_json(v),
                repr: py_repr_json(v),
                truthy: !a.is_empty(),
            },
            Value::Object(m) => FieldValue::Object {
                type_name: "dict".into(),
                text: py_repr_json(v),
                repr: py_repr_json(v),
                truthy: !m.is_empty(),
            },
        }
    }

    /// Python type name.
    pub fn type_name(&self) -> &str {
        match self {
            FieldValue::Str(_) => "str",
            FieldValue::Int(_) => "int",
            FieldValue::Float(_) => "float",
            FieldValue::Bool(_) => "bool",
            FieldValue::None => "NoneType",
            FieldValue::Alt { .. } => "AltField",
            FieldValue::Object { type_name, .. } => type_name,
            FieldValue::DateTime(_) => "UtilDatetime",
        }
    }

    /// Python `str(value)`.
    pub fn py_str(&self) -> String {
        match self {
            FieldValue::Str(s) => s.clone(),
            FieldValue::Int(i) => i.to_string(),
            FieldValue::Float(f) => float_repr(*f),
            FieldValue::Bool(b) => if *b { "True" } else { "False" }.into(),
            FieldValue::None => "None".into(),
            FieldValue::Alt { default, .. } => default.clone(),
            FieldValue::Object { text, .. } => text.clone(),
            FieldValue::DateTime(dt) => dt.py_str(),
        }
    }

    /// Python `repr(value)`.
    pub fn repr(&self) -> String {
        match self {
            FieldValue::Str(s) => repr_str(s),
            FieldValue::Alt { .. } => "<flux.util.AltField object>".into(),
            FieldValue::Object { repr, .. } => repr.clone(),
            FieldValue::DateTime(dt) => format!(
                "UtilDatetime({}, {}, {}, {}, {}, {}{})",
                dt.year,
                dt.month,
                dt.day,
                dt.hour,
                dt.minute,
                dt.second,
                if dt.micro != 0 {
                    format!(", {}", dt.micro)
                } else {
                    String::new()
                }
            ),
            other => other.py_str(),
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            FieldValue::Str(s) => !s.is_empty(),
            FieldValue::Int(i) => *i != 0,
            FieldValue::Float(f) => *f != 0.0,
            FieldValue::Bool(b) => *b,
            FieldValue::None => false,
            FieldValue::Alt { .. } | FieldValue::DateTime(_) => true,
            FieldValue::Object { truthy, .. } => *truthy,
        }
    }

    /// `getattr(value, name)` for the attributes flux formats use.
    pub fn attr(&self, name: &str) -> PyResult<FieldValue> {
        match (self, name) {
            (FieldValue::Alt { ascii, .. }, "ascii") => Ok(FieldValue::Str(ascii.clone())),
            (FieldValue::Alt { default, .. }, "default") => Ok(FieldValue::Str(default.clone())),
            _ => Err(PyError::Attribute(format!(
                "'{}' object has no attribute '{}'",
                self.type_name(),
                name
            ))),
        }
    }

    /// Python `format(value, spec)` (the built-in `__format__` of the type).
    pub fn format(&self, spec: &str) -> PyResult<String> {
        match self {
            FieldValue::Str(s) => format_str(s, spec, "str"),
            FieldValue::Int(i) => format_int(i128::from(*i), spec, "int"),
            FieldValue::Bool(b) => {
                if spec.is_empty() {
                    Ok(self.py_str())
                } else {
                    format_int(i128::from(*b), spec, "bool")
                }
            }
            FieldValue::Float(f) => format_float(*f, spec),
            FieldValue::Alt { default, .. } => format_str(default, spec, "str"),
            FieldValue::None | FieldValue::Object { .. } => {
                if spec.is_empty() {
                    Ok(self.py_str())
                } else if let FieldValue::Object {
                    type_name, text, ..
                } = self
                {
                    if type_name == "int" {
                        // a big integer: format its digits as a string would
                        return format_str(text, spec, "int");
                    }
                    Err(PyError::Type(format!(
                        "unsupported format string passed to {type_name}.__format__"
                    )))
                } else {
                    Err(PyError::type_err(
                        "unsupported format string passed to NoneType.__format__",
                    ))
                }
            }
            FieldValue::DateTime(_) => Err(PyError::type_err(
                "datetime values are formatted by the formatter",
            )),
        }
    }

    /// Python `a < b` ordering used by `list.sort()`, or the `TypeError`
    /// Python raises for unorderable operands.
    pub fn py_lt(&self, other: &FieldValue) -> PyResult<bool> {
        use FieldValue::*;
        let num = |v: &FieldValue| -> Option<f64> {
            match v {
                Int(i) => Some(*i as f64),
                Float(f) => Some(*f),
                Bool(b) => Some(f64::from(u8::from(*b))),
                _ => Option::None,
            }
        };
        match (self, other) {
            (Str(a), Str(b)) => Ok(a.chars().cmp(b.chars()) == Ordering::Less),
            (Int(a), Int(b)) => Ok(a < b),
            (DateTime(a), DateTime(b)) => {
                Ok(a.unix < b.unix || (a.unix == b.unix && a.micro < b.micro))
            }
            _ => match (num(self), num(other)) {
                (Some(a), Some(b)) => Ok(a < b),
                _ => Err(PyError::Type(format!(
                    "'<' not supported between instances of '{}' and '{}'",
                    self.type_name(),
                    other.type_name()
                ))),
            },
        }
    }
}

/// An object whose attributes are formatted (flux's `ResourceStatusLine`,
/// `ResourceSetExtra`, ...).
pub trait FormatItem {
    /// `module.Class`, as `type(obj)` prints it (for error messages).
    fn class_path(&self) -> String;
    /// `getattr(self, name)` for a single attribute name, or `None` if the
    /// object has no such attribute.
    fn attr(&self, name: &str) -> Option<FieldValue>;
}

/// The class name part of a class path.
pub(crate) fn class_name(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}
