//! hwloc topology → graph: one `node` with its sockets, cores and GPUs.
//!
//! The cores and GPUs are exactly those flux-core's `rlist_from_hwloc()`
//! reports for the same input (the [`topo`] crate decides them), so the
//! graph's R (`Graph::to_r`) equals what `flux R encode --xml` gives.  On
//! top of that the XML is walked again to learn the structure Fluxion's
//! hwloc reader builds (`cluster0 > HOST > socketN > coreM`):
//!
//! * a `socket` pool per hwloc `Package` whose cpuset keeps an allowed CPU,
//!   numbered by logical index (document order);
//! * each core below its nearest `Package` (core ids are the global hwloc
//!   logical indexes, dense `0..n-1` as in R);
//! * each GPU below the `Package` its PCI device hangs from, else below
//!   the node (GPU ids `0..n-1` in hwloc's logical OS-device order).
//!
//! Other hwloc objects (NUMA nodes, groups, dies, caches, PUs, other I/O)
//! are not modelled.  If the structural walk ever disagrees with the
//! flux-core counts (an exotic document), the counts win and the cores or
//! GPUs concerned are placed directly below the node instead.
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
use topo::Topology;

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

/// Where each kept core and GPU sits: `Some(socket index)` or the node.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
struct Layout {
    sockets: usize,
    cores: Vec<Option<usize>>,
    gpus: Vec<Option<usize>>,
}

impl Graph {
    /// A `cluster0` graph holding the node described by an hwloc XML
    /// topology (v1 or v2), as described in the module documentation.
    pub fn from_hwloc_xml(xml: &str, opts: &HwlocOptions) -> Result<Graph, ModelError> {
        let mut g = Graph::new();
        let cluster = g.intern("cluster");
        let root = g.add_root(Pool::new(cluster).id(0));
        g.add_hwloc_node(root, xml, opts)?;
        Ok(g)
    }

    /// Add the node of an hwloc XML topology below `parent` (usually the
    /// cluster pool); returns the node pool.
    pub fn add_hwloc_node(
        &mut self,
        parent: VertexId,
        xml: &str,
        opts: &HwlocOptions,
    ) -> Result<VertexId, ModelError> {
        let t = topo::from_hwloc_xml(xml).map_err(|e| ModelError::Hwloc(e.to_string()))?;
        let ncores = usize::try_from(t.cores.len()).unwrap_or(usize::MAX);
        let ngpus = usize::try_from(t.gpus.len()).unwrap_or(usize::MAX);
        let mut layout = if opts.sockets {
            scan(xml).unwrap_or_default()
        } else {
            Layout::default()
        };
        // The flux-core counts are authoritative.
        if layout.cores.len() != ncores {
            layout.cores = vec![None; ncores];
        }
        if layout.gpus.len() != ngpus {
            layout.gpus = vec![None; ngpus];
        }
        self.add_node_layout(parent, &t, &layout, opts)
    }

    /// A `cluster0` graph holding one node with the cores and GPUs of a
    /// discovered topology (no sockets: discovery does not report them).
    pub fn from_topology(t: &Topology, opts: &HwlocOptions) -> Result<Graph, ModelError> {
        let mut g = Graph::new();
        let cluster = g.intern("cluster");
        let root = g.add_root(Pool::new(cluster).id(0));
        g.add_topology_node(root, t, opts)?;
        Ok(g)
    }

    /// Add one node with the cores and GPUs of `t` below `parent`.
    pub fn add_topology_node(
        &mut self,
        parent: VertexId,
        t: &Topology,
        opts: &HwlocOptions,
    ) -> Result<VertexId, ModelError> {
        let layout = Layout {
            sockets: 0,
            cores: vec![None; usize::try_from(t.cores.len()).unwrap_or(0)],
            gpus: vec![None; usize::try_from(t.gpus.len()).unwrap_or(0)],
        };
        self.add_node_layout(parent, t, &layout, opts)
    }

    fn add_node_layout(
        &mut self,
        parent: VertexId,
        t: &Topology,
        layout: &Layout,
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
        for s in 0..layout.sockets {
            let sv = self.add_child(node, Pool::new(socket_ty).id(id_of(s)).rank(rank))?;
            for (c, _) in layout
                .cores
                .iter()
                .enumerate()
                .filter(|(_, &k)| k == Some(s))
            {
                self.add_child(sv, Pool::new(core_ty).id(id_of(c)).rank(rank))?;
            }
            for (k, _) in layout
                .gpus
                .iter()
                .enumerate()
                .filter(|(_, &k)| k == Some(s))
            {
                self.add_child(sv, Pool::new(gpu_ty).id(id_of(k)).rank(rank))?;
            }
        }
        for (c, _) in layout.cores.iter().enumerate().filter(|(_, k)| k.is_none()) {
            self.add_child(node, Pool::new(core_ty).id(id_of(c)).rank(rank))?;
        }
        for (k, _) in layout.gpus.iter().enumerate().filter(|(_, k)| k.is_none()) {
            self.add_child(node, Pool::new(gpu_ty).id(id_of(k)).rank(rank))?;
        }
        Ok(node)
    }
}

/// A CPU set as hwloc writes it: 32-bit words, least significant first,
/// plus "every higher bit" for the `0xf...f` prefix.
#[derive(Debug, Default, Clone)]
struct Bits {
    words: Vec<u32>,
    infinite: bool,
}

impl Bits {
    /// Parse `0x00000003,0xffff0000` (most significant chunk first).  A
    /// malformed set reads as empty, as hwloc leaves it.
    fn parse(s: &str) -> Bits {
        let (rest, infinite) = match s.strip_prefix("0xf...f") {
            Some("") => {
                return Bits {
                    words: Vec::new(),
                    infinite: true,
                }
            }
            Some(r) => match r.strip_prefix(',') {
                Some(r) => (r, true),
                None => return Bits::default(),
            },
            None => (s, false),
        };
        let mut words = Vec::new();
        for chunk in rest.split(',').rev() {
            let h = chunk.trim();
            let h = h
                .strip_prefix("0x")
                .or_else(|| h.strip_prefix("0X"))
                .unwrap_or(h);
            if h.is_empty() {
                words.push(0);
                continue;
            }
            match u64::from_str_radix(h, 16) {
                // Wider chunks spill upwards in hwloc; keep the low word.
                Ok(v) => words.push((v & 0xffff_ffff) as u32),
                Err(_) => return Bits::default(),
            }
        }
        Bits { words, infinite }
    }

    fn word(&self, i: usize) -> u32 {
        match self.words.get(i) {
            Some(&w) => w,
            None if self.infinite => u32::MAX,
            None => 0,
        }
    }

    fn is_empty(&self) -> bool {
        !self.infinite && self.words.iter().all(|&w| w == 0)
    }

    fn intersects(&self, o: &Bits) -> bool {
        if self.infinite && o.infinite {
            return true;
        }
        let n = self.words.len().max(o.words.len());
        (0..n).any(|i| self.word(i) & o.word(i) != 0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Normal,
    Memory,
    Io,
    Misc,
}

/// The structural walk (see the module documentation).  `None` when the
/// document cannot be read (the caller then uses a flat layout; the
/// `topo` crate has already validated it).
fn scan(xml: &str) -> Option<Layout> {
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts).ok()?;
    let top = doc.root_element();
    let v1 = match top.attribute("version") {
        None => true,
        Some(v) => {
            v.split('.')
                .next()
                .and_then(|m| m.trim().parse::<u32>().ok())?
                < 2
        }
    };
    let root = top
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == "object")?;
    let allowed = root
        .attribute("allowed_cpuset")
        .map(Bits::parse)
        .filter(|b| !b.is_empty());
    let kept = |n: roxmltree::Node<'_, '_>| -> bool {
        let cs = n.attribute("cpuset").map(Bits::parse).unwrap_or_default();
        match &allowed {
            Some(a) => cs.intersects(a),
            None => !cs.is_empty(),
        }
    };

    let mut layout = Layout::default();
    let mut n_pci = 0usize;
    // OS devices with a GPU backend: (PCI ancestor, backend, package).
    let mut candidates: Vec<(Option<roxmltree::NodeId>, String, Option<usize>)> = Vec::new();
    // (element, package, nearest kept PCI device)
    let mut stack = vec![(root, None::<usize>, None::<roxmltree::NodeId>)];
    while let Some((node, pkg, pci)) = stack.pop() {
        let ty = node.attribute("type").unwrap_or("").to_ascii_lowercase();
        let mut pkg_here = pkg;
        let mut pci_here = pci;
        match ty.as_str() {
            "package" | "socket" if kept(node) => {
                pkg_here = Some(layout.sockets);
                layout.sockets += 1;
            }
            "core" if kept(node) => layout.cores.push(pkg),
            "pcidev" | "pci" if pci_kept(node) => {
                n_pci += 1;
                pci_here = Some(node.id());
            }
            "osdev" => {
                let backend = node
                    .children()
                    .filter(|c| c.is_element() && c.tag_name().name() == "info")
                    .find(|c| c.attribute("name") == Some("Backend"))
                    .and_then(|c| c.attribute("value"));
                if let Some(b) = backend {
                    candidates.push((pci, b.to_string(), pkg));
                }
            }
            _ => {}
        }
        let mut kids: Vec<(Kind, roxmltree::Node<'_, '_>)> = node
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "object")
            .map(|c| (kind_of(c, v1), c))
            .collect();
        kids.sort_by_key(|&(k, _)| k);
        for (_, c) in kids.into_iter().rev() {
            stack.push((c, pkg_here, pci_here));
        }
    }

    // flux-core's GPU rule over the OS devices in logical order.
    if n_pci > 0 {
        let mut visited: Vec<(Option<roxmltree::NodeId>, &str)> = Vec::new();
        for (pci, backend, pkg) in &candidates {
            if !matches!(backend.as_str(), "CUDA" | "NVML" | "OpenCL" | "RSMI") {
                continue;
            }
            if pci.is_some() && visited.iter().any(|&(p, b)| p == *pci && b != backend) {
                continue;
            }
            if visited.len() < n_pci {
                visited.push((*pci, backend));
            }
            layout.gpus.push(*pkg);
        }
    }
    Some(layout)
}

fn kind_of(n: roxmltree::Node<'_, '_>, v1: bool) -> Kind {
    let ty = n.attribute("type").unwrap_or("").to_ascii_lowercase();
    match ty.as_str() {
        "numanode" | "node" if v1 => Kind::Normal,
        "numanode" | "node" | "memcache" => Kind::Memory,
        "bridge" | "hostbridge" | "pcibridge" | "pcidev" | "pci" | "osdev" => Kind::Io,
        "misc" if v1 && n.attribute("cpuset").is_some() => Kind::Normal,
        "misc" => Kind::Misc,
        _ => Kind::Normal,
    }
}

/// hwloc keeps PCI devices of "important" classes with a well-formed bus id.
fn pci_kept(n: roxmltree::Node<'_, '_>) -> bool {
    if let Some(b) = n.attribute("pci_busid") {
        if !busid_ok(b) {
            return false;
        }
    }
    let class = n
        .attribute("pci_type")
        .and_then(|t| {
            let (c, rest) = t.split_once(' ')?;
            if !rest.trim_start().starts_with('[') {
                return None;
            }
            u32::from_str_radix(c, 16).ok()
        })
        .unwrap_or(0);
    let base = class >> 8;
    matches!(base, 0x00..=0x03 | 0x06 | 0x0b | 0x12)
        || class == 0x0c04
        || class == 0x0c06
        || class == 0x0502
}

/// `domain:bus:dev.func` in hex.
fn busid_ok(s: &str) -> bool {
    let hex = |p: &str, max: usize| {
        !p.is_empty() && p.len() <= max && p.bytes().all(|b| b.is_ascii_hexdigit())
    };
    let mut it = s.splitn(3, ':');
    let (Some(d), Some(b), Some(rest)) = (it.next(), it.next(), it.next()) else {
        return false;
    };
    let Some((dev, func)) = rest.split_once('.') else {
        return false;
    };
    let func: String = func.chars().take(1).collect();
    hex(d, 8) && hex(b, 2) && hex(dev, 2) && hex(&func, 1)
}

#[cfg(test)]
mod tests;
