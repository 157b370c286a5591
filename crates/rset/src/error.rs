//! Error type.

use crate::{MAX_ITEMS, MAX_NODES};
use serde_json::Value;

/// Why an R could not be parsed, built or transformed.
///
/// `Display` gives a message naming the offending key and value.  Where
/// flux-core reports a specific text, `Display` is exactly that text; where
/// flux-core reports none (an empty error buffer), `Display` still says
/// what was wrong (a deliberate difference, docs/compatibility.md).
/// [`RError::line`] is the line number jansson would attach (-1 for none).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RError {
    /// A JSON syntax error, or a structural (jansson unpack) error such as
    /// `Object item not found: execution` or `Expected integer, got real`.
    #[error("{text}")]
    Json {
        /// jansson's text.
        text: String,
        /// jansson's line (-1 when none).
        line: i32,
    },
    /// `version` is not 1.
    #[error("invalid version={0}")]
    Version(i32),
    /// An R_lite `rank` string that is not an idset (flux reports no text).
    #[error("invalid R_lite rank idset '{0}'")]
    Ranks(String),
    /// A child value that is not an idset string (flux reports no text).
    #[error("rank {rank}: invalid {name} idset {value}")]
    Child {
        /// The rank being built.
        rank: u32,
        /// The child type.
        name: String,
        /// The offending JSON value.
        value: String,
    },
    /// The same ids given twice for one rank (flux: EEXIST, no text).
    #[error("rank {rank}: {name} ids {ids} given twice")]
    Overlap {
        /// The rank.
        rank: u32,
        /// The child type.
        name: String,
        /// The ids given twice.
        ids: String,
    },
    /// `nodelist` is not a valid list of hostlists or has the wrong number
    /// of hosts (flux reports no text).
    #[error("{0}")]
    Nodelist(String),
    /// A node with no resources at all cannot be appended (flux:
    /// `rnode_copy_avail` fails, no text).
    #[error("rank {0} has no resources")]
    EmptyNode(u32),
    /// Properties, constraint, hostlist and configuration errors, with
    /// flux-core's text.
    #[error("{0}")]
    Msg(String),
    /// An R that breaks a MUST of RFC 20 which flux-core does not check:
    /// the key, the offending value and the RFC's sentence.
    #[error("R {key}={value}: RFC 20: \"{rule}\"")]
    Rfc20 {
        /// The offending key (`execution.expiration`).
        key: &'static str,
        /// The offending value as JSON (cut to a readable length).
        value: String,
        /// The sentence of RFC 20 it breaks.
        rule: &'static str,
    },
    /// More nodes than this implementation accepts.
    #[error("R describes more than {MAX_NODES} nodes")]
    TooManyNodes,
    /// More child and property entries than this implementation accepts.
    #[error("R describes more than {MAX_ITEMS} child and property entries")]
    TooLarge,
}

impl RError {
    /// The line number jansson would report with the text (-1 for none).
    pub fn line(&self) -> i32 {
        match self {
            RError::Json { line, .. } => *line,
            _ => -1,
        }
    }

    pub(crate) fn msg(s: impl Into<String>) -> RError {
        RError::Msg(crate::json::truncate_text(s.into()))
    }

    pub(crate) fn rfc20(key: &'static str, value: &Value, rule: &'static str) -> RError {
        RError::Rfc20 {
            key,
            value: short(crate::json::dumps_compact(value)),
            rule,
        }
    }

    pub(crate) fn unpack(s: impl Into<String>) -> RError {
        RError::Json {
            text: crate::json::truncate_text(s.into()),
            line: 1,
        }
    }
}

/// A value as an error message shows it: whole up to 64 bytes, else its
/// first 48 bytes and its length (an idset or hostlist may be megabytes).
pub(crate) fn short(mut s: String) -> String {
    if s.len() > 64 {
        let mut end = 48;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        let n = s.len();
        s.truncate(end);
        s.push_str(&format!("...({n} bytes)"));
    }
    s
}

/// Why [`crate::Rset::rerank`] failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RerankError {
    /// The hostlist does not decode (flux: EINVAL).
    #[error("hostlist_decode: {0}: Invalid argument")]
    Hostlist(String),
    /// More hosts than nodes (flux: EOVERFLOW).
    #[error("Number of hosts ({hosts}) is greater than node count ({nodes})")]
    TooMany {
        /// Hosts given.
        hosts: usize,
        /// Nodes in the set.
        nodes: usize,
    },
    /// Fewer hosts than nodes (flux: ENOSPC).
    #[error("Number of hosts ({hosts}) is less than node count ({nodes})")]
    TooFew {
        /// Hosts given.
        hosts: usize,
        /// Nodes in the set.
        nodes: usize,
    },
    /// A host is not in the set (flux: ENOENT); the old ranks are restored.
    #[error("Host {0} not found in resources")]
    NotFound(String),
    /// Some node has no hostname, so the current mapping cannot be saved.
    #[error("some nodes have no hostname")]
    NoHostnames,
}

/// Why [`crate::Rset::hosts_to_ranks`] failed.
pub type HostsError = RError;
