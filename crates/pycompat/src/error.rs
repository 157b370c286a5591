//! Error types.
//!
//! flux's Python tools report every failure as a Python exception caught by
//! `CLIMain`, which prints `flux-resource: ERROR: <str(exception)>` and exits
//! with status 1.  [`PyError`] models the exception classes that can occur
//! while formatting, and its `Display` is exactly `str(exception)` (for a
//! `KeyError` that is the *repr* of its argument, quotes included).

use crate::repr::repr_str;

/// A Python exception raised while parsing or applying a format.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PyError {
    /// `ValueError(msg)`.
    #[error("{0}")]
    Value(String),
    /// `TypeError(msg)`.
    #[error("{0}")]
    Type(String),
    /// `KeyError(arg)`: `str()` of a KeyError is the repr of its argument.
    #[error("{}", repr_str(.0))]
    Key(String),
    /// `IndexError(msg)`.
    #[error("{0}")]
    Index(String),
    /// `AttributeError(msg)`.
    #[error("{0}")]
    Attribute(String),
    /// `OverflowError(msg)`.
    #[error("{0}")]
    Overflow(String),
}

impl PyError {
    pub fn value(msg: impl Into<String>) -> PyError {
        PyError::Value(msg.into())
    }
    pub fn type_err(msg: impl Into<String>) -> PyError {
        PyError::Type(msg.into())
    }
}

/// Result alias used throughout the crate.
pub type PyResult<T> = Result<T, PyError>;
