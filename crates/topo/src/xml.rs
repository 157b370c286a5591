//! hwloc XML (format v1 and v2) → [`Topology`], following what flux-core's
//! `rlist_from_hwloc()` gets from an XML topology loaded by hwloc 2.x with
//! `HWLOC_TYPE_FILTER_KEEP_IMPORTANT` for I/O objects and no CPU-binding
//! restriction (flux passes `RHWLOC_NO_RESTRICT` for XML input).
//!
//! What is modelled:
//!
//! * **Cores**: every `Core` object hwloc would keep.  Logical indexes are
//!   dense, so the core idset is `0..n-1`.  hwloc drops objects whose
//!   cpuset is empty once disallowed CPUs are removed; the allowed set is
//!   the root object's `allowed_cpuset` (hwloc ignores it elsewhere).
//! * **GPUs**: OS devices whose `Backend` info is `CUDA`, `NVML`, `OpenCL`
//!   or `RSMI`, visited in hwloc's logical order; a device is skipped when
//!   its nearest `PCIDev` ancestor was already counted under a *different*
//!   backend (so CUDA + NVML + OpenCL views of one NVIDIA card count once,
//!   while AMD CPX/TPX partitions, several RSMI devices on one PCI device,
//!   all count).  hwloc sizes the "already seen" table by the number of PCI
//!   devices and stops recording once it is full; with no PCI device at all
//!   flux reports no GPU.  GPU ids are `0..n-1`.  The `subtype` attribute
//!   alone does not make a GPU: flux only reads `Backend`.
//! * **Hostname**: the root object's first `HostName` info, if any.
//! * **Validation** that makes hwloc reject a document: unknown object
//!   types, an attribute before `type`, normal objects without `cpuset`,
//!   I/O or Misc objects with one, a `cpuset` under a parent without one,
//!   NUMA nodes without `nodeset`, impossible parent/child kinds (v2), a v2
//!   root without a non-empty `nodeset`, unexpected child elements, and XML
//!   versions above 2.
//! * **Filtering** as hwloc does on import: PCI devices of unimportant
//!   classes and DMA OS devices are dropped (their children move up), and a
//!   PCI object with a malformed `pci_busid` is ignored the same way.
//!
//! * **Placement** ([`Placement`], for the `model` crate's graph): each kept
//!   core and GPU below its nearest kept `Package` (numbered in logical
//!   order), or below none.
//!
//! Not modelled: cache attribute coherence checks, distance matrices, and
//! the exact set of spellings `hwloc_type_sscanf` accepts (we accept the
//! names hwloc writes, case-insensitively, plus the v1 aliases).

use idset::IdSet;

use crate::bits::{parse_hwloc_bitmap, pci_class_from_type, valid_pci_busid};
use crate::{Placement, TopoError, Topology};

/// Object types as hwloc 2.x knows them after import.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    Machine,
    Package,
    Die,
    Core,
    Pu,
    Group,
    Cache,
    NumaNode,
    MemCache,
    Bridge,
    PciDev,
    OsDev,
    Misc,
}

/// The four families hwloc 2 sorts children into (and lists them in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Normal,
    Memory,
    Io,
    Misc,
}

fn parse_type(s: &str) -> Option<Ty> {
    let l = s.to_ascii_lowercase();
    Some(match l.as_str() {
        "machine" | "system" => Ty::Machine,
        "package" | "socket" => Ty::Package,
        "die" => Ty::Die,
        "core" => Ty::Core,
        "pu" => Ty::Pu,
        "group" | "tile" | "module" => Ty::Group,
        "cache" | "l1cache" | "l2cache" | "l3cache" | "l4cache" | "l5cache" | "l1icache"
        | "l2icache" | "l3icache" => Ty::Cache,
        "numanode" | "node" => Ty::NumaNode,
        "memcache" => Ty::MemCache,
        "bridge" | "hostbridge" | "pcibridge" => Ty::Bridge,
        "pcidev" | "pci" => Ty::PciDev,
        "osdev" => Ty::OsDev,
        "misc" => Ty::Misc,
        _ => return None,
    })
}

/// One imported object.  Objects hwloc would ignore are not stored; their
/// children are attached to the nearest kept ancestor instead.
struct Obj {
    ty: Ty,
    kind: Kind,
    parent: Option<usize>,
    children: Vec<usize>,
    cpuset: Option<IdSet>,
    backend: Option<String>,
    hostname: Option<String>,
}

/// Where in the document something is, for error messages.
fn pos_of(doc: &roxmltree::Document<'_>, node: roxmltree::Node<'_, '_>) -> (u32, u32) {
    let p = doc.text_pos_at(node.range().start);
    (p.row, p.col)
}

fn invalid(doc: &roxmltree::Document<'_>, node: roxmltree::Node<'_, '_>, msg: String) -> TopoError {
    let (line, column) = pos_of(doc, node);
    TopoError::InvalidXml {
        line,
        column,
        message: msg,
    }
}

/// Deepest element nesting accepted.  libxml2 (hwloc's usual XML reader)
/// stops at 256 too; the limit also keeps the recursive XML parser we use
/// well inside the stack on hostile input.
const MAX_DEPTH: usize = 256;

/// Line and column (1-based, in characters) of byte offset `at`.
fn line_col(xml: &str, at: usize) -> (u32, u32) {
    let before = xml.get(..at).unwrap_or(xml);
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (
        u32::try_from(line).unwrap_or(u32::MAX),
        u32::try_from(col).unwrap_or(u32::MAX),
    )
}

/// Before handing the text to the (recursive) XML parser: refuse nesting
/// deeper than [`MAX_DEPTH`] and DTD internal subsets (hwloc never writes
/// one, and entities declared there could expand into deeper nesting than
/// this scan sees).  The scan over-counts on malformed markup, never under.
fn check_nesting(xml: &str) -> Result<(), TopoError> {
    let b = xml.as_bytes();
    let find = |from: usize, pat: &[u8]| -> Option<usize> {
        b.get(from..)?
            .windows(pat.len())
            .position(|w| w == pat)
            .map(|p| from + p)
    };
    let mut depth = 0usize;
    let mut i = 0usize;
    while let Some(off) = b.get(i..).and_then(|r| r.iter().position(|&c| c == b'<')) {
        let start = i + off;
        let rest = &b[start..];
        let end = if rest.starts_with(b"<!--") {
            find(start + 4, b"-->").map(|e| e + 3)
        } else if rest.starts_with(b"<![CDATA[") {
            find(start + 9, b"]]>").map(|e| e + 3)
        } else if rest.starts_with(b"<?") {
            find(start + 2, b"?>").map(|e| e + 2)
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            find(start + 2, b">").map(|e| e + 1)
        } else {
            // a tag (or declaration): find its '>' outside quotes
            let decl = rest.starts_with(b"<!");
            let mut j = start + 1;
            let mut quote: Option<u8> = None;
            let mut close = None;
            while let Some(&c) = b.get(j) {
                match (quote, c) {
                    (Some(q), c) if c == q => quote = None,
                    (Some(_), _) => {}
                    (None, b'"') | (None, b'\'') => quote = Some(c),
                    (None, b'[') if decl => {
                        let (line, column) = line_col(xml, start);
                        return Err(TopoError::InvalidXml {
                            line,
                            column,
                            message: "DTD internal subsets are not supported".into(),
                        });
                    }
                    (None, b'>') => {
                        close = Some(j);
                        break;
                    }
                    _ => {}
                }
                j += 1;
            }
            if let Some(e) = close {
                let self_closing = e > start + 1 && b.get(e - 1) == Some(&b'/');
                if !decl && !self_closing {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        let (line, column) = line_col(xml, start);
                        return Err(TopoError::InvalidXml {
                            line,
                            column,
                            message: format!("elements nested deeper than {MAX_DEPTH} levels"),
                        });
                    }
                }
            }
            close.map(|e| e + 1)
        };
        match end {
            Some(e) => i = e,
            // unterminated markup: the parser will report it
            None => return Ok(()),
        }
    }
    Ok(())
}

/// Read an hwloc XML topology (see the module documentation).
pub(crate) fn parse(xml: &str) -> Result<(Topology, Placement), TopoError> {
    check_nesting(xml)?;
    let opts = roxmltree::ParsingOptions {
        allow_dtd: true,
        ..roxmltree::ParsingOptions::default()
    };
    let doc = roxmltree::Document::parse_with_options(xml, opts).map_err(|e| {
        let p = e.pos();
        TopoError::XmlSyntax {
            line: p.row,
            column: p.col,
            message: e.to_string(),
        }
    })?;
    let bad = |node, msg: String| Err(invalid(&doc, node, msg));
    let top = doc.root_element();
    let name = top.tag_name().name();
    if name != "topology" {
        return bad(
            top,
            format!("root element is <{name}>, expected <topology>"),
        );
    }
    let version_major = match top.attribute("version") {
        None => 1,
        Some(v) => {
            let major = v.split('.').next().unwrap_or("");
            match major.trim().parse::<u32>() {
                Ok(m) => m,
                Err(_) => return bad(top, format!("invalid topology version '{v}'")),
            }
        }
    };
    if version_major > 2 {
        return bad(
            top,
            format!("cannot import XML version {version_major}.x (hwloc 2 reads versions 1 and 2)"),
        );
    }
    let v1 = version_major < 2;
    let Some(root_node) = top.children().find(|n| n.is_element()) else {
        return bad(top, "<topology> has no root <object>".into());
    };
    let name = root_node.tag_name().name();
    if name != "object" {
        return bad(
            root_node,
            format!("expected the root <object>, found <{name}>"),
        );
    }

    let mut objs: Vec<Obj> = Vec::new();
    let mut root_allowed: Option<IdSet> = None;
    let mut root_nodeset: Option<Option<IdSet>> = None;
    // Iterative walk: (element, kept parent index).
    let mut stack: Vec<(roxmltree::Node<'_, '_>, Option<usize>)> = vec![(root_node, None)];
    while let Some((node, parent)) = stack.pop() {
        let is_root = objs.is_empty() && parent.is_none();
        let (ty, attrs) = read_object_attrs(&doc, node)?;
        let mut kind = match ty {
            Ty::NumaNode | Ty::MemCache => Kind::Memory,
            Ty::Bridge | Ty::PciDev | Ty::OsDev => Kind::Io,
            Ty::Misc => Kind::Misc,
            _ => Kind::Normal,
        };
        let mut ty = ty;
        // v1 NUMA nodes and cpuset-carrying Misc objects sat in the normal tree.
        if v1 && ty == Ty::NumaNode {
            kind = Kind::Normal;
        }
        if v1 && ty == Ty::Misc && attrs.cpuset.is_some() {
            ty = Ty::Group;
            kind = Kind::Normal;
        }
        // Non-root Machines become Groups.
        if !is_root && ty == Ty::Machine {
            ty = Ty::Group;
        }
        let parent_obj = parent.and_then(|p| objs.get(p));
        if let Some(p) = parent_obj {
            let misplaced = match kind {
                Kind::Normal => p.kind != Kind::Normal,
                Kind::Memory => matches!(p.kind, Kind::Io | Kind::Misc),
                Kind::Io => matches!(p.kind, Kind::Memory | Kind::Misc),
                Kind::Misc => false,
            };
            if misplaced {
                return bad(
                    node,
                    format!(
                        "{} object cannot be a child of {} object",
                        kind_name(kind),
                        kind_name(p.kind)
                    ),
                );
            }
        }
        if kind == Kind::Normal && attrs.cpuset.is_none() {
            return bad(node, format!("{} object without cpuset", attrs.type_name));
        }
        if matches!(kind, Kind::Io | Kind::Misc) && attrs.cpuset.is_some() {
            return bad(node, format!("{} object with a cpuset", attrs.type_name));
        }
        if let Some(p) = parent_obj {
            if attrs.cpuset.is_some() && p.cpuset.is_none() {
                return bad(
                    node,
                    format!(
                        "{} object with a cpuset under a parent without one",
                        attrs.type_name
                    ),
                );
            }
        }
        if ty == Ty::NumaNode && attrs.nodeset.is_none() {
            return bad(node, "NUMANode object without nodeset".into());
        }
        if is_root {
            root_allowed = attrs.allowed_cpuset.clone();
            root_nodeset = Some(attrs.nodeset.clone());
        }

        // Children: info-like elements first, then objects only.
        let mut child_objects = Vec::new();
        let mut backend = None;
        let mut hostname = None;
        for child in node.children().filter(|n| n.is_element()) {
            let tag = child.tag_name().name();
            if tag == "object" {
                child_objects.push(child);
                continue;
            }
            if !child_objects.is_empty() {
                return bad(child, format!("unexpected <{tag}> after child objects"));
            }
            match tag {
                "info" => {
                    let mut name = None;
                    let mut value = None;
                    for a in child.attributes() {
                        match a.name() {
                            "name" => name = Some(a.value()),
                            "value" => value = Some(a.value()),
                            other => {
                                return bad(
                                    child,
                                    format!("unexpected attribute '{other}' in <info>"),
                                )
                            }
                        }
                    }
                    if let (Some(n), Some(v)) = (name, value) {
                        if n == "Backend" && backend.is_none() {
                            backend = Some(v.to_string());
                        }
                        if n == "HostName" && hostname.is_none() {
                            hostname = Some(v.to_string());
                        }
                    }
                }
                "page_type" => {
                    if ty != Ty::NumaNode && !is_root {
                        return bad(
                            child,
                            format!("<page_type> in a {} object", attrs.type_name),
                        );
                    }
                }
                "userdata" => {}
                "distances" if v1 => {}
                _ => return bad(child, format!("unexpected <{tag}> in an object")),
            }
        }

        let keep = is_root || !attrs.ignored;
        let this = if keep {
            let idx = objs.len();
            objs.push(Obj {
                ty,
                kind,
                parent,
                children: Vec::new(),
                cpuset: attrs.cpuset,
                backend,
                hostname,
            });
            if let Some(p) = parent.and_then(|p| objs.get_mut(p)) {
                p.children.push(idx);
            }
            Some(idx)
        } else {
            parent
        };
        // Push in reverse so that children are visited in document order.
        for c in child_objects.into_iter().rev() {
            stack.push((c, this));
        }
    }

    let Some(root) = objs.first() else {
        return bad(root_node, "no root object".into());
    };
    if root.cpuset.is_none() {
        return bad(root_node, "root object without cpuset".into());
    }
    if !v1 {
        match &root_nodeset {
            Some(Some(ns)) if !ns.is_empty() => {}
            Some(Some(_)) => return bad(root_node, "root object with empty nodeset".into()),
            _ => return bad(root_node, "root object without nodeset".into()),
        }
    }
    let hostname = root.hostname.clone();

    // Cores and packages: kept unless their cpuset has no allowed CPU left.
    let allowed = root_allowed.filter(|a| !a.is_empty());
    let kept = |o: &Obj| match (&o.cpuset, &allowed) {
        (Some(cs), Some(a)) => cs.intersects(a),
        (Some(cs), None) => !cs.is_empty(),
        (None, _) => false,
    };
    // Kept packages by logical index (normal objects are in document order).
    let mut socket_of = vec![None; objs.len()];
    let mut sockets = 0;
    for (i, o) in objs.iter().enumerate() {
        if o.ty == Ty::Package && kept(o) {
            socket_of[i] = Some(sockets);
            sockets += 1;
        }
    }
    let socket_above = |idx: usize| {
        let mut p = objs.get(idx).and_then(|o| o.parent);
        while let Some(i) = p {
            if let Some(s) = socket_of.get(i).copied().flatten() {
                return Some(s);
            }
            p = objs.get(i).and_then(|o| o.parent);
        }
        None
    };
    let cores: Vec<Option<usize>> = (0..objs.len())
        .filter(|&i| objs[i].ty == Ty::Core && kept(&objs[i]))
        .map(socket_above)
        .collect();
    let gpus: Vec<Option<usize>> = gpu_osdevs(&objs).into_iter().map(socket_above).collect();
    let topology = Topology {
        hostname,
        cores: dense(cores.len()),
        gpus: dense(gpus.len()),
    };
    Ok((
        topology,
        Placement {
            sockets,
            cores,
            gpus,
        },
    ))
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Normal => "a normal",
        Kind::Memory => "a memory",
        Kind::Io => "an I/O",
        Kind::Misc => "a Misc",
    }
}

/// `0..n-1` as an idset.
pub(crate) fn dense(n: usize) -> IdSet {
    match n {
        0 => IdSet::new(),
        n => IdSet::from_range(0, u32::try_from(n - 1).unwrap_or(u32::MAX)),
    }
}

struct Attrs<'a> {
    type_name: &'a str,
    cpuset: Option<IdSet>,
    nodeset: Option<IdSet>,
    allowed_cpuset: Option<IdSet>,
    /// hwloc would drop this object (filtered or malformed PCI attributes).
    ignored: bool,
}

fn read_object_attrs<'a>(
    doc: &roxmltree::Document<'_>,
    node: roxmltree::Node<'a, '_>,
) -> Result<(Ty, Attrs<'a>), TopoError> {
    let mut it = node.attributes();
    let first = it.next();
    let type_name = match first {
        Some(a) if a.name() == "type" => a.value(),
        Some(a) => {
            return Err(invalid(
                doc,
                node,
                format!("object attribute '{}' found before type", a.name()),
            ))
        }
        None => return Err(invalid(doc, node, "object without a type attribute".into())),
    };
    let Some(ty) = parse_type(type_name) else {
        return Err(invalid(
            doc,
            node,
            format!("unrecognized object type '{type_name}'"),
        ));
    };
    let mut attrs = Attrs {
        type_name,
        cpuset: None,
        nodeset: None,
        allowed_cpuset: None,
        ignored: false,
    };
    let mut pci_class = 0u32;
    let mut osdev_type = 0u64;
    for a in it {
        let v = a.value();
        match a.name() {
            // a malformed set reads as empty, as hwloc_bitmap_sscanf leaves it
            "cpuset" => attrs.cpuset = Some(parse_hwloc_bitmap(v).unwrap_or_default()),
            "nodeset" => attrs.nodeset = Some(parse_hwloc_bitmap(v).unwrap_or_default()),
            "allowed_cpuset" => {
                attrs.allowed_cpuset = Some(parse_hwloc_bitmap(v).unwrap_or_default())
            }
            "pci_busid" if matches!(ty, Ty::PciDev | Ty::Bridge) && !valid_pci_busid(v) => {
                attrs.ignored = true;
            }
            "pci_type" if ty == Ty::PciDev => pci_class = pci_class_from_type(v),
            "osdev_type" if ty == Ty::OsDev => {
                // sscanf("%lu"): leading digits, the rest ignored
                let t = v.trim_start();
                let digits: String = t.chars().take_while(char::is_ascii_digit).collect();
                osdev_type = digits.parse::<u64>().unwrap_or(0);
            }
            _ => {}
        }
    }
    // HWLOC_TYPE_FILTER_KEEP_IMPORTANT for PCI devices and OS devices.
    if ty == Ty::PciDev && !pci_class_is_important(pci_class) {
        attrs.ignored = true;
    }
    if ty == Ty::OsDev && osdev_type == 4 {
        // DMA channels are not "important"
        attrs.ignored = true;
    }
    Ok((ty, attrs))
}

/// hwloc's list of "important" PCI classes (display, network, storage,
/// unclassified, processors, fibre channel, InfiniBand, CXL memory,
/// bridges, processing accelerators).
fn pci_class_is_important(class: u32) -> bool {
    let base = class >> 8;
    matches!(base, 0x00..=0x03 | 0x06 | 0x0b | 0x12)
        || class == 0x0c04
        || class == 0x0c06
        || class == 0x0502
}

/// flux-core's GPU rule (see the module documentation): the OS devices
/// counted as GPUs, in logical order.
fn gpu_osdevs(objs: &[Obj]) -> Vec<usize> {
    let n_pci = objs.iter().filter(|o| o.ty == Ty::PciDev).count();
    let mut gpus = Vec::new();
    if n_pci == 0 {
        return gpus;
    }
    let mut visited: Vec<(Option<usize>, &str)> = Vec::with_capacity(n_pci);
    for idx in osdev_order(objs) {
        let Some(obj) = objs.get(idx) else { continue };
        let Some(backend) = obj.backend.as_deref() else {
            continue;
        };
        if !matches!(backend, "CUDA" | "NVML" | "OpenCL" | "RSMI") {
            continue;
        }
        let pcidev = pci_ancestor(objs, idx);
        if pcidev.is_some() && visited.iter().any(|&(p, b)| p == pcidev && b != backend) {
            continue;
        }
        if visited.len() < n_pci {
            visited.push((pcidev, backend));
        }
        gpus.push(idx);
    }
    gpus
}

fn pci_ancestor(objs: &[Obj], idx: usize) -> Option<usize> {
    let mut p = objs.get(idx).and_then(|o| o.parent);
    while let Some(i) = p {
        let o = objs.get(i)?;
        if o.ty == Ty::PciDev {
            return Some(i);
        }
        p = o.parent;
    }
    None
}

/// OS devices in hwloc's logical order: a depth-first walk visiting each
/// object's normal children, then memory, then I/O, then Misc children.
fn osdev_order(objs: &[Obj]) -> Vec<usize> {
    let mut out = Vec::new();
    if objs.is_empty() {
        return out;
    }
    let mut stack = vec![0usize];
    while let Some(i) = stack.pop() {
        let Some(o) = objs.get(i) else { continue };
        if o.ty == Ty::OsDev {
            out.push(i);
        }
        let mut kids: Vec<usize> = o.children.clone();
        kids.sort_by_key(|&c| objs.get(c).map(|x| x.kind).unwrap_or(Kind::Misc));
        stack.extend(kids.into_iter().rev());
    }
    out
}
