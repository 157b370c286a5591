//! Error type.

use crate::{MAX_ITEMS, MAX_NODES};

/// Why an R could not be parsed, built or transformed.
///
/// `Display` gives a message naming the offending input.  Where flux-core
/// reports a specific text, `Display` is exactly that text;
/// [`RError::flux_text`] returns what flux-core would put in its error
/// buffer (which for a few failures is empty), and [`RError::line`] the
/// line number jansson would attach (-1 for none).
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
    #[error("rank {rank}: {name} ids overlap ids already present")]
    Overlap {
        /// The rank.
        rank: u32,
        /// The child type.
        name: String,
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
    /// More nodes than this implementation accepts.
    #[error("R describes more than {MAX_NODES} nodes")]
    TooManyNodes,
    /// More child and property entries than this implementation accepts.
    #[error("R describes more than {MAX_ITEMS} child and property entries")]
    TooLarge,
}

impl RError {
    /// The text flux-core would report for this failure (possibly empty).
    pub fn flux_text(&self) -> String {
        match self {
            RError::Json { text, .. } => text.clone(),
            RError::Version(v) => format!("invalid version={v}"),
            RError::Msg(m) => m.clone(),
            RError::TooManyNodes | RError::TooLarge => self.to_string(),
            RError::Ranks(_)
            | RError::Child { .. }
            | RError::Overlap { .. }
            | RError::Nodelist(_)
            | RError::EmptyNode(_) => String::new(),
        }
    }

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

    pub(crate) fn unpack(s: impl Into<String>) -> RError {
        RError::Json {
            text: crate::json::truncate_text(s.into()),
            line: 1,
        }
    }
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
