//! Where the inventory R comes from, in flux-core's order, and the loader
//! behind `resource.reload`.

use std::path::Path;

use roster_core::{Inventory, Method};
use rpc::errno::{EINVAL, ENOENT, EPROTO};
use rpc::RpcError;
use rset::Rset;

use crate::{io_text, ServeError};

/// The candidate sources of R at start-up.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    pub config: Option<&'a config::Config>,
    /// `resource.R` from the state directory, as text.
    pub stored: Option<&'a str>,
    /// `--parent-R FILE` (flux's `job-info` source).
    pub parent_r: Option<&'a Path>,
}

impl Source<'_> {
    /// Configured R (`path` / `[[resource.config]]`), else the stored R
    /// (`kvs`), else the enclosing instance's R (`job-info`), else this
    /// machine discovered from /sys (`dynamic-discovery`).
    pub fn resolve(&self) -> Result<Inventory, ServeError> {
        if let Some(c) = self.config {
            if let Some(r) = c.resource.inventory()? {
                return Ok(Inventory::from_rset(r, Method::Configuration));
            }
        }
        if let Some(text) = self.stored {
            return Inventory::from_json_text(text, Method::Kvs)
                .map_err(|e| ServeError::Inventory(format!("{}: {e}", store::R_FILE)));
        }
        if let Some(path) = self.parent_r {
            let text = std::fs::read_to_string(path).map_err(|e| {
                ServeError::Inventory(format!("{}: {}", path.display(), io_text(&e)))
            })?;
            return Inventory::from_json_text(&text, Method::JobInfo)
                .map_err(|e| ServeError::Inventory(format!("{}: {e}", path.display())));
        }
        let topo = topo::discover_local().map_err(|e| {
            ServeError::Inventory(format!("failed to discover local resources: {e}"))
        })?;
        let host = topo.hostname.clone().unwrap_or_else(local_hostname);
        let mut r = Rset::new();
        r.append_node(Some(&host), 0, &topo.cores, &topo.gpus)
            .map_err(|e| ServeError::Inventory(format!("cannot build R of this machine: {e}")))?;
        Ok(Inventory::from_rset(r, Method::DynamicDiscovery))
    }
}

pub use topo::local_hostname;

/// Load R for `resource.reload {path, xml}` with flux-core's error texts:
/// a JSON R file, or (`xml`) a directory of `<rank>.xml` hwloc files,
/// under the reload directory `dir` and only regular files of a bounded
/// size ([`crate::reload`]).
pub fn load_reload_r(path: &str, xml: bool, dir: Option<&Path>) -> Result<Rset, RpcError> {
    let real = crate::reload::resolve(path, dir)?;
    if xml {
        crate::reload::check_dir(path, &real)?;
        return load_xml_dir(&real);
    }
    let text = crate::reload::read_text(path, &real)?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| RpcError::new(EPROTO, format!("{path}:{} {e}", e.line())))?;
    Rset::from_json(&v).map_err(|e| RpcError::new(EPROTO, format!("{path}: {e}")))
}

fn load_xml_dir(dir: &Path) -> Result<Rset, RpcError> {
    let shown = dir.display();
    let entries = std::fs::read_dir(dir)
        .map_err(|e| RpcError::new(ENOENT, format!("{shown}: {}", io_text(&e))))?;
    let mut files: Vec<(u32, std::path::PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(stem) = name.strip_suffix(".xml") else {
            continue;
        };
        if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(rank) = stem.parse::<u32>() else {
            continue;
        };
        files.push((rank, entry.path()));
    }
    if files.is_empty() {
        return Err(RpcError::new(
            EINVAL,
            format!("{shown}: invalid directory: no XML input files found"),
        ));
    }
    files.sort();
    let bad = || RpcError::new(EINVAL, "error building R from hwloc XML: Invalid argument");
    let mut r = Rset::new();
    for (rank, file) in files {
        let shown = file.display().to_string();
        let text = crate::reload::read_text(&shown, &file)?;
        let t = topo::from_hwloc_xml(&text).map_err(|_| bad())?;
        let host = t.hostname.clone().unwrap_or_else(|| format!("rank{rank}"));
        r.append_node(Some(&host), rank, &t.cores, &t.gpus)
            .map_err(|_| bad())?;
    }
    Ok(r)
}
