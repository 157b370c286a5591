//! hwloc topology → graph: one `node` with its sockets, cores and GPUs.
//!
//! The cores and GPUs are exactly those flux-core's `rlist_from_hwloc()`
//! reports for the same input (the [`topo`] crate decides them), so the
//! graph's R (`Graph::to_r`) equals what `flux R encode --xml` gives.  On
//! top of that the XML is walked again to learn the structure Fluxion's
//! hwloc reader builds (`cluster0 > HOST > socketN > coreM`), as
//! `topo`'s reading of the document places them ([`topo::Placement`]):
//!
//! * a `socket` pool per hwloc `Package` whose cpuset keeps an allowed CPU,
//!   numbered by logical index (document order);
//! * each core below its nearest `Package` (core ids are the global hwloc
//!   logical indexes, dense `0..n-1` as in R);
//! * each GPU below the `Package` its PCI device hangs from, else below
//!   the node (GPU ids `0..n-1` in hwloc's logical OS-device order).
//!
//! Other hwloc objects (NUMA nodes, groups, dies, caches, PUs, other I/O)
//! are not modelled.
//!
//! The node is named after the topology's `HostName` (else the caller's
//! fallback, else `node<rank>`) and split as Fluxion does (basename =
//! name without trailing digits, id = those digits).  Every pool carries
//! the given rank.
//!
//! Discovery of the local machine ([`Graph::from_topology`] with
//! [`topo::discover_local`]) has no package information: its cores and
//! GPUs sit directly below the node.

use crate::from_r::split_hostname;
use crate::graph::{Graph, Pool};
use crate::{ModelError, VertexId};
use topo::{Placement, Topology};

/// How to build the node pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HwlocOptions {
    /// Execution target (broker rank) of the node; every pool carries it.
    pub rank: i64,
    /// Hostname to use when the topology has none (flux uses the local
    /// hostname then); without one the node is `node<rank>`.
    pub hostname: Option<String>,
    /// Model hwloc packages as `socket` pools (true by default).
    pub sockets: bool,
}

impl Default for HwlocOptions {
    fn default() -> Self {
        HwlocOptions {
            rank: 0,
            hostname: None,
            sockets: true,
        }
    }
}

impl Graph {
    /// A `cluster0` graph holding the node described by an hwloc XML
    /// topology (v1 or v2), as described in the module documentation.
    pub fn from_hwloc_xml(xml: &str, opts: &HwlocOptions) -> Result<Graph, ModelError> {
        in_cluster(|g, root| g.add_hwloc_node(root, xml, opts))
    }

    /// Add the node of an hwloc XML topology below `parent` (usually the
    /// cluster pool); returns the node pool.
    pub fn add_hwloc_node(
        &mut self,
        parent: VertexId,
        xml: &str,
        opts: &HwlocOptions,
    ) -> Result<VertexId, ModelError> {
        let (t, mut layout) =
            topo::from_hwloc_xml_placed(xml).map_err(|e| ModelError::Hwloc(e.to_string()))?;
        if !opts.sockets {
            layout = flat(&t);
        }
        self.add_node_layout(parent, &t, &layout, opts)
    }

    /// A `cluster0` graph holding one node with the cores and GPUs of a
    /// discovered topology (no sockets: discovery does not report them).
    pub fn from_topology(t: &Topology, opts: &HwlocOptions) -> Result<Graph, ModelError> {
        in_cluster(|g, root| g.add_topology_node(root, t, opts))
    }

    /// Add one node with the cores and GPUs of `t` below `parent`.
    pub fn add_topology_node(
        &mut self,
        parent: VertexId,
        t: &Topology,
        opts: &HwlocOptions,
    ) -> Result<VertexId, ModelError> {
        self.add_node_layout(parent, t, &flat(t), opts)
    }

    fn add_node_layout(
        &mut self,
        parent: VertexId,
        t: &Topology,
        layout: &Placement,
        opts: &HwlocOptions,
    ) -> Result<VertexId, ModelError> {
        let rank = opts.rank;
        let node_ty = self.intern("node");
        let mut p = Pool::new(node_ty).rank(rank);
        match t.hostname.as_deref().or(opts.hostname.as_deref()) {
            Some(h) if !h.is_empty() => {
                let (base, id) = split_hostname(h)?;
                let b = self.intern(base);
                p = p.basename(b).id(id).name(h);
            }
            _ => p = p.id(rank),
        }
        let node = self.add_child(parent, p)?;
        let socket_ty = self.intern("socket");
        let core_ty = self.intern("core");
        let gpu_ty = self.intern("gpu");
        let id_of = |i: usize| i64::try_from(i).unwrap_or(i64::MAX);
        // The cores, then the GPUs, placed in socket `at` (`None`: on the node).
        let place = |g: &mut Graph, at: Option<usize>, under: VertexId| {
            for (placed, ty) in [(&layout.cores, core_ty), (&layout.gpus, gpu_ty)] {
                for (i, _) in placed.iter().enumerate().filter(|(_, &k)| k == at) {
                    g.add_child(under, Pool::new(ty).id(id_of(i)).rank(rank))?;
                }
            }
            Ok::<(), ModelError>(())
        };
        for s in 0..layout.sockets {
            let sv = self.add_child(node, Pool::new(socket_ty).id(id_of(s)).rank(rank))?;
            place(self, Some(s), sv)?;
        }
        place(self, None, node)?;
        Ok(node)
    }
}

/// A `cluster0` graph holding what `add` puts below its root.
fn in_cluster(
    add: impl FnOnce(&mut Graph, VertexId) -> Result<VertexId, ModelError>,
) -> Result<Graph, ModelError> {
    let mut g = Graph::new();
    let cluster = g.intern("cluster");
    let root = g.add_root(Pool::new(cluster).id(0));
    add(&mut g, root)?;
    Ok(g)
}

/// Every core and GPU of `t` directly below the node.
fn flat(t: &Topology) -> Placement {
    Placement {
        sockets: 0,
        cores: vec![None; usize::try_from(t.cores.len()).unwrap_or(0)],
        gpus: vec![None; usize::try_from(t.gpus.len()).unwrap_or(0)],
    }
}

#[cfg(test)]
mod tests;
