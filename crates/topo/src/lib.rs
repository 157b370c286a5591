//! Node resource discovery: what one node has, as flux-core's
//! `rlist_from_hwloc()` would report it — the logical ids of its physical
//! cores and of its unique GPUs, and its hostname.
//!
//! Two sources:
//!
//! * [`discover_local`] reads Linux `/sys` and `/proc` directly (no hwloc
//!   library) and restricts the result to the process CPU binding, as flux
//!   does by default.  [`discover_from_root`] does the same below another
//!   root directory (tests, containers, chroots).  See the `sysfs` module
//!   notes in the source for exactly what is read.
//! * [`from_hwloc_xml`] reads an hwloc XML topology (format v1 or v2, as
//!   written by `lstopo --of xml` or `hwloc-gather-topology`), without any
//!   binding restriction, as flux does for XML input.
//!
//! In both cases ids are hwloc *logical* indexes, which are dense: a node
//! with n cores has `core` = `0..n-1`; GPUs likewise.

use std::path::{Path, PathBuf};

use idset::IdSet;

mod bits;
mod sysfs;
mod xml;

pub use sysfs::kernel_hostname;

/// Errors from discovery.  Each names what was wrong and where.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    /// The input is not well-formed XML.
    #[error("hwloc XML syntax error at line {line}, column {column}: {message}")]
    XmlSyntax {
        line: u32,
        column: u32,
        message: String,
    },
    /// Well-formed XML that hwloc would refuse to load as a topology.
    #[error("invalid hwloc XML topology at line {line}, column {column}: {message}")]
    InvalidXml {
        line: u32,
        column: u32,
        message: String,
    },
    /// A file could not be read.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A sysfs/procfs file with content we cannot interpret.
    #[error("{}: {message}", path.display())]
    Sysfs { path: PathBuf, message: String },
    /// The process CPU binding contains no online CPU (hwloc's restriction fails).
    #[error("the CPU binding ({binding}) contains no online CPU ({online})")]
    EmptyBinding { binding: String, online: String },
}

/// What one node has, as hwloc would report it to flux: logical ids of
/// physical cores and of unique GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// hwloc's `HostName` (missing in some XML files; flux then falls back to
    /// the local hostname, which is the caller's business).
    pub hostname: Option<String>,
    pub cores: IdSet,
    pub gpus: IdSet,
}

/// Discover this machine from `/sys` and `/proc`, restricted to the process
/// CPU binding.
/// This machine's hostname as flux reports it ([`kernel_hostname`] of `/`),
/// else `$HOSTNAME`, else `localhost`.
pub fn local_hostname() -> String {
    kernel_hostname(Path::new("/"))
        .ok()
        .flatten()
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".into())
}

pub fn discover_local() -> Result<Topology, TopoError> {
    discover_from_root(Path::new("/"))
}

/// Discover the machine whose filesystem root is `root` (`/` for this one):
/// reads `root/sys/...` and `root/proc/...` only.  Used by tests with fake
/// trees; `discover_local()` is `discover_from_root("/")`.
pub fn discover_from_root(root: &Path) -> Result<Topology, TopoError> {
    sysfs::discover(root)
}

/// Read an hwloc XML topology (v1 or v2 format).
pub fn from_hwloc_xml(xml: &str) -> Result<Topology, TopoError> {
    xml::parse(xml).map(|(t, _)| t)
}

/// Where an hwloc XML topology places its cores and GPUs: below a socket
/// (a `Package` with an allowed CPU, numbered in hwloc's logical order) or
/// below none.  `cores[i]` is core `i`'s socket, `gpus[k]` GPU `k`'s.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    pub sockets: usize,
    pub cores: Vec<Option<usize>>,
    pub gpus: Vec<Option<usize>>,
}

/// [`from_hwloc_xml`] with the [`Placement`] of what it found (the one
/// reading of the document the `model` crate's graph is built from).
pub fn from_hwloc_xml_placed(xml: &str) -> Result<(Topology, Placement), TopoError> {
    xml::parse(xml)
}

#[cfg(test)]
mod tests;
