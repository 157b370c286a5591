//! RFC 20 resource sets ("R", version 1), modelled on flux-core's librlist.
//!
//! [`Rset`] holds execution targets (broker ranks) with optional hostnames,
//! named child resources (`core` always, `gpu` and any others) as RFC 22
//! idsets, properties, `starttime`/`expiration`, `nslots` and the opaque
//! `scheduling` object.  It parses R with flux-core's validation and error
//! texts ([`Rset::from_json`], [`Rset::from_json_str`]), encodes it exactly
//! as flux-core's `rlist_to_R` does ([`Rset::to_json`], [`Rset::encode`],
//! including key order and R_lite grouping), prints the short form
//! ([`Rset::dumps`]), and implements the set algebra (append, add, diff,
//! union, intersect, copy/remove ranks, remap, rerank), properties, RFC 31
//! constraints ([`Rset::copy_constraint`]), the `[[resource.config]]`
//! array ([`Rset::from_config`]) and verification ([`verify()`]).
//!
//! # Fidelity notes
//!
//! * Output key order: flux-core stores each node's children and
//!   properties in CZMQ hash tables and emits them in table order (for
//!   example `{"gpu": "0-3", "core": "0-95"}`).  The [`zhash`] model
//!   reproduces that order, including the reversal a table copy causes.
//! * Node list order: the short form groups nodes in the order of flux's
//!   internal list, which operations such as `diff` rearrange; [`Rset`]
//!   keeps the same order.
//! * `flux R decode --count core` prints a running tally that flux-core
//!   does not decrement when nodes are removed; [`Rset::core_avail`]
//!   reproduces it.
//!
//! # Deliberate deviations
//!
//! * Inputs beyond [`MAX_NODES`] / [`MAX_ITEMS`] are refused (flux-core
//!   tries to allocate them).
//! * RFC 20's MUSTs that flux-core does not check are enforced: `R_lite`
//!   must be an array, `expiration` must be greater than `starttime` when
//!   both are set, property names must not contain `!`
//!   ([`RError::Rfc20`] names the key, the value and the sentence); every
//!   error says what was wrong where flux-core's error buffer is empty.
//! * A `properties` constraint meeting a node with neither a hostname nor
//!   the property does not match (flux-core dereferences a NULL hostname).
//! * Hash-table side effects of read-only operations (lookups done while
//!   encoding, counting, intersecting or matching) are not persisted in
//!   the source set; where they influence the result of the same call
//!   (the R_lite child order, the property order of constraint copies)
//!   they are replayed.
//!
//! # Resource limits
//!
//! Everything is range based, so huge idsets (`0-2147483647`) cost nothing,
//! but each node is stored individually (about 200 bytes).  Sets are
//! limited to [`MAX_NODES`] nodes and [`MAX_ITEMS`] child and property
//! entries; larger inputs fail with [`RError::TooManyNodes`] or
//! [`RError::TooLarge`] rather than exhausting memory.  JSON nesting is
//! limited to 2048 levels, as in jansson.

mod config;
mod constraint;
mod encode;
mod error;
mod node;
mod nodelist;
mod parse;
mod rset;
mod split;
mod summary;
mod verify;
pub(crate) mod zhash;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub mod json;

pub use constraint::{Constraint, HostMatch};
pub use error::{HostsError, RError, RerankError};
pub use parse::EXPIRATION_RULE;
pub use rset::{NodeInfo, Rset};
pub use summary::RSummary;
pub use verify::{verify, Verification, VerifyConfig, VerifyMode};

/// The largest number of nodes an [`Rset`] may hold (2^20 = 1,048,576,
/// matching flux's per-range hostlist limit).  flux-core itself has no
/// limit but needs gigabytes of memory well before this.
pub const MAX_NODES: usize = 1 << 20;

/// The largest number of per-node entries (children plus properties,
/// summed over nodes) a parsed R or configuration may create (2^23);
/// larger inputs fail with [`RError::TooLarge`].  Real systems need a
/// handful per node.
pub const MAX_ITEMS: u64 = 1 << 23;

/// Characters not allowed in property names (RFC 20: "MUST NOT contain
/// the following illegal characters: ! & ' \" ^ ` | ( )"; flux-core
/// allows `!`, Roster follows the RFC).
pub(crate) const PROPERTY_INVALID: &str = "!^&'\"`|()";
