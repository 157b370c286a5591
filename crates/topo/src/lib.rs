//! Node resource discovery (stub: being written; the API below is the contract).

use idset::IdSet;

/// Errors from discovery.
#[derive(Debug, thiserror::Error)]
pub enum TopoError {
    #[error("{0}")]
    Other(String),
}

/// What one node has, as hwloc would report it to flux: logical ids of
/// physical cores and of unique GPUs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    pub hostname: Option<String>,
    pub cores: IdSet,
    pub gpus: IdSet,
}

/// Discover this machine (restricted to the process CPU affinity).
pub fn discover_local() -> Result<Topology, TopoError> {
    Err(TopoError::Other("not implemented".into()))
}

/// Read an hwloc XML topology (v1 or v2 format).
pub fn from_hwloc_xml(_xml: &str) -> Result<Topology, TopoError> {
    Err(TopoError::Other("not implemented".into()))
}
