//! The Flux resource model (RFC 4, 2017 draft with methods and allocation
//! data): composite resource pools in a compact arena graph.
//!
//! * [`Graph`] holds pools ([`Pool`] to create, [`PoolRef`] to read) in a
//!   containment forest; URIs are `<hierarchy>:<path>`, e.g.
//!   `containment:/cluster0/node3/core7` (RDL wrote `default:/...`).
//!   Other subsystems (power, network) are extra edges and paths.
//! * Allocation data and methods (Allocate, Free, Allocated, Available,
//!   reservations, shared lists, aggregates) are in [`alloc`].
//! * Structural methods (Copy, Duplicate, Merge, Unlink, Find, Traversal,
//!   Match) are in [`ops`] and [`select`].
//! * Conversions: [`jgf`] (JSON Graph Format as in RFC 20/40 and as
//!   Fluxion writes it) and [`from_r`] (RFC 20 R).
//! * [`hwloc`]: a node (sockets, cores, GPUs) from an hwloc XML topology
//!   or from local discovery.
//! * [`matcher`]: a first jobspec matcher for `node>slot>core[,gpu]` and
//!   `slot>core[,gpu]`; [`jobspec`] reads jobspecs written in YAML or JSON.

pub mod alloc;
mod fanout;
pub mod from_r;
pub mod graph;
pub mod hwloc;
pub mod intern;
pub mod jgf;
pub mod jobspec;
pub mod matcher;
pub mod ops;
pub mod select;

#[cfg(test)]
mod proptests;

pub use alloc::{JobId, JobInfo, JobKind, FOREVER};
pub use graph::{EdgeRef, Graph, Pool, PoolRef, State, VertexId};
pub use intern::Sym;
pub use ops::Visit;
pub use select::Pred;

/// Errors of the resource model.  Messages name the offending pool (by
/// path), job, key or input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    #[error("no such vertex {0}")]
    NoVertex(u32),
    #[error("the graph cannot hold more vertices")]
    Full,
    #[error("no resource at '{0}'")]
    NoPath(String),
    #[error("{0}")]
    Structure(String),
    #[error("{path}: requested {requested} units but only {available} available")]
    Insufficient {
        path: String,
        requested: u64,
        available: u64,
    },
    #[error("{path}: unavailable because {at} is {state}")]
    Unavailable {
        path: String,
        at: String,
        state: &'static str,
    },
    #[error("{path}: unavailable because {ancestor} is fully allocated")]
    AncestorFull { path: String, ancestor: String },
    #[error("{path}: busy: job(s) {jobs} hold resources below it")]
    Busy { path: String, jobs: String },
    #[error("{path}: job {job} holds nothing here")]
    NoAllocation { path: String, job: JobId },
    #[error("{path}: cannot free {requested} units of job {job}, which holds {held}")]
    FreeTooMany {
        path: String,
        job: JobId,
        requested: u64,
        held: u64,
    },
    #[error("unknown job {0}")]
    NoJob(JobId),
    #[error("job {job} {reason}")]
    Job { job: JobId, reason: String },
    #[error("invariant violated: {0}")]
    Invariant(String),
    #[error("JGF: {0}")]
    Jgf(String),
    #[error("find expression: {0}")]
    Expr(String),
    #[error("R: {0}")]
    R(String),
    #[error("jobspec: {0}")]
    Jobspec(String),
    #[error("hwloc: {0}")]
    Hwloc(String),
}
