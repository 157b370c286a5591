//! Linux discovery from `/sys` and `/proc`, approximating what hwloc 2.x
//! reports to flux-core's `rlist_from_hwloc()` for the local machine.
//!
//! Everything is read below a root directory (`/` for the real machine), so
//! tests can build fake trees:
//!
//! * `sys/devices/system/cpu/online` and `sys/devices/system/cpu/cpuN/`:
//!   the online CPUs (a `cpuN/online` file containing `0` also marks a CPU
//!   offline when the `online` list is missing);
//! * `cpuN/topology/{core_cpus_list,thread_siblings_list}`: the hardware
//!   threads of the CPU's core (SMT siblings form one core), and
//!   `physical_package_id` / `die_id` for ordering.  A CPU without topology
//!   information is its own core;
//! * `proc/self/task/*/status` (else `proc/self/status`): `Cpus_allowed_list`,
//!   the CPU binding.  hwloc's `HWLOC_CPUBIND_PROCESS` is the union over all
//!   threads; flux restricts the topology to it, dropping every core with no
//!   allowed CPU.  No status file means no restriction;
//! * `proc/sys/kernel/hostname`: hwloc's `HostName` (uname's nodename);
//! * GPUs, approximating hwloc's CUDA/NVML/OpenCL/RSMI backends: NVIDIA PCI
//!   display devices (vendor `0x10de`, class `0x03xxxx`) under
//!   `sys/bus/pci/devices`, or `proc/driver/nvidia/gpus/*` when the PCI tree
//!   shows none; AMD compute units from the KFD topology
//!   (`sys/class/kfd/kfd/topology/nodes/*/properties` with a nonzero
//!   `simd_count`, one per partition as RSMI lists them), else AMD PCI
//!   display or accelerator devices (vendor `0x1002`, class `0x03xxxx` or
//!   `0x12xxxx`).  As with hwloc's restriction (which removes I/O devices
//!   whose parent object is removed), a PCI GPU whose `local_cpulist` holds
//!   no allowed CPU is dropped.  hwloc would not see a GPU whose driver or
//!   vendor library is missing, nor respect `CUDA_VISIBLE_DEVICES` the same
//!   way; this is the documented approximation.
//!
//! Core ids are hwloc logical indexes: cores sorted by package, die, then
//! lowest CPU number, numbered densely after the restriction, so the core
//! idset is always `0..n-1`.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use idset::IdSet;

use crate::bits::parse_cpulist;
use crate::xml::dense;
use crate::{TopoError, Topology};

fn io_err(path: &Path, source: io::Error) -> TopoError {
    TopoError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Read a small text file; `Ok(None)` if it does not exist (or is not readable
/// as a file because the kernel does not provide it).
fn read_opt(path: &Path) -> Result<Option<String>, TopoError> {
    match fs::read(path) {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied
            ) || e.raw_os_error() == Some(20) /* ENOTDIR */
                || e.raw_os_error() == Some(19) /* ENODEV */
                || e.raw_os_error() == Some(22) /* EINVAL */ =>
        {
            Ok(None)
        }
        Err(e) => Err(io_err(path, e)),
    }
}

fn parse_list_file(path: &Path, text: &str) -> Result<IdSet, TopoError> {
    parse_cpulist(text).ok_or_else(|| TopoError::Sysfs {
        path: path.to_path_buf(),
        message: format!("invalid CPU list '{}'", text.trim()),
    })
}

/// List directory entries; a missing directory is empty.
fn list_dir(path: &Path) -> Result<Vec<(String, PathBuf)>, TopoError> {
    let rd = match fs::read_dir(path) {
        Ok(rd) => rd,
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound) => return Ok(Vec::new()),
        Err(e) if e.raw_os_error() == Some(20) => return Ok(Vec::new()),
        Err(e) => return Err(io_err(path, e)),
    };
    let mut out = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| io_err(path, e))?;
        if let Some(name) = ent.file_name().to_str() {
            out.push((name.to_string(), ent.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// One physical core as discovered.
#[derive(Debug)]
struct CoreInfo {
    package: i64,
    die: i64,
    cpus: IdSet,
}

/// The CPUs listed as `cpuN` directories.
fn cpu_dirs(cpu_root: &Path) -> Result<BTreeMap<u32, PathBuf>, TopoError> {
    let mut out = BTreeMap::new();
    for (name, path) in list_dir(cpu_root)? {
        if let Some(num) = name.strip_prefix("cpu") {
            if !num.is_empty() && num.bytes().all(|b| b.is_ascii_digit()) {
                if let Ok(n) = num.parse::<u32>() {
                    if n <= idset::MAX_ID {
                        out.insert(n, path);
                    }
                }
            }
        }
    }
    Ok(out)
}

fn read_int(path: &Path) -> Result<Option<i64>, TopoError> {
    Ok(read_opt(path)?.and_then(|s| s.trim().parse::<i64>().ok()))
}

/// The CPU binding: union of `Cpus_allowed_list` over the process's threads.
fn affinity(root: &Path) -> Result<Option<IdSet>, TopoError> {
    let mut files = Vec::new();
    for (_, task) in list_dir(&root.join("proc/self/task"))? {
        files.push(task.join("status"));
    }
    if files.is_empty() {
        files.push(root.join("proc/self/status"));
    }
    let mut acc: Option<IdSet> = None;
    for f in files {
        let Some(text) = read_opt(&f)? else { continue };
        for line in text.lines() {
            if let Some(v) = line.strip_prefix("Cpus_allowed_list:") {
                let set = parse_list_file(&f, v)?;
                acc = Some(match acc {
                    Some(a) => a.union(&set),
                    None => set,
                });
            }
        }
    }
    Ok(acc)
}

/// The kernel's host name of the machine whose root is `root` (hwloc's
/// `HostName`), `None` when unreadable or empty: the one reader of the
/// host name (discovery, [`crate::local_hostname`], the transport's `Host`
/// check), each caller with its own fallback.
pub fn kernel_hostname(root: &Path) -> Result<Option<String>, TopoError> {
    Ok(read_opt(&root.join("proc/sys/kernel/hostname"))?
        .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
        .filter(|s| !s.is_empty()))
}

/// The physical cores of the online CPUs, in hwloc's logical order.
fn cores(root: &Path) -> Result<Vec<CoreInfo>, TopoError> {
    let cpu_root = root.join("sys/devices/system/cpu");
    let dirs = cpu_dirs(&cpu_root)?;
    let online_path = cpu_root.join("online");
    let online = match read_opt(&online_path)? {
        Some(text) => parse_list_file(&online_path, &text)?,
        None => {
            let mut set = IdSet::new();
            for (&n, dir) in &dirs {
                let off = read_opt(&dir.join("online"))?
                    .map(|s| s.trim() == "0")
                    .unwrap_or(false);
                if !off {
                    set.insert(n);
                }
            }
            set
        }
    };
    if online.is_empty() {
        return Err(TopoError::Sysfs {
            path: cpu_root,
            message: "no online CPU found".into(),
        });
    }

    let mut seen = IdSet::new();
    let mut cores = Vec::new();
    for cpu in online.iter() {
        if seen.contains(cpu) {
            continue;
        }
        let topo = dirs.get(&cpu).map(|d| d.join("topology"));
        let (siblings, package, die) = match topo {
            Some(t) => {
                let mut sib = None;
                for f in ["core_cpus_list", "thread_siblings_list"] {
                    let p = t.join(f);
                    if let Some(text) = read_opt(&p)? {
                        sib = Some(parse_list_file(&p, &text)?);
                        break;
                    }
                }
                let package = read_int(&t.join("physical_package_id"))?.unwrap_or(0);
                let die = read_int(&t.join("die_id"))?.unwrap_or(0);
                (sib, package, die)
            }
            None => (None, 0, 0),
        };
        let mut cpus = siblings.unwrap_or_default().intersection(&online);
        cpus.insert(cpu);
        // A sibling already assigned elsewhere (inconsistent sysfs) stays there.
        let cpus = cpus.difference(&seen);
        seen.add(&cpus);
        cores.push(CoreInfo { package, die, cpus });
    }

    // hwloc orders packages (then dies, then cores) by their first CPU.
    let mut pkg_first: HashMap<i64, u32> = HashMap::new();
    let mut die_first: HashMap<(i64, i64), u32> = HashMap::new();
    for c in &cores {
        let f = c.cpus.first().unwrap_or(u32::MAX);
        pkg_first
            .entry(c.package)
            .and_modify(|v| *v = (*v).min(f))
            .or_insert(f);
        die_first
            .entry((c.package, c.die))
            .and_modify(|v| *v = (*v).min(f))
            .or_insert(f);
    }
    cores.sort_by_key(|c| {
        (
            pkg_first.get(&c.package).copied().unwrap_or(u32::MAX),
            die_first
                .get(&(c.package, c.die))
                .copied()
                .unwrap_or(u32::MAX),
            c.cpus.first().unwrap_or(u32::MAX),
        )
    });
    Ok(cores)
}

fn read_hex(path: &Path) -> Result<Option<u64>, TopoError> {
    Ok(read_opt(path)?.and_then(|s| {
        let t = s.trim();
        let t = t
            .strip_prefix("0x")
            .or_else(|| t.strip_prefix("0X"))
            .unwrap_or(t);
        u64::from_str_radix(t, 16).ok()
    }))
}

/// A GPU seen on the PCI bus, with the CPUs local to it (if known).
struct PciGpu {
    vendor: u64,
    local_cpus: Option<IdSet>,
}

fn pci_gpus(root: &Path) -> Result<BTreeMap<String, PciGpu>, TopoError> {
    let mut out = BTreeMap::new();
    for (name, dir) in list_dir(&root.join("sys/bus/pci/devices"))? {
        let Some(vendor) = read_hex(&dir.join("vendor"))? else {
            continue;
        };
        let Some(class) = read_hex(&dir.join("class"))? else {
            continue;
        };
        let base = class >> 16;
        let is_gpu = match vendor {
            0x10de => base == 0x03,
            0x1002 => base == 0x03 || base == 0x12,
            _ => false,
        };
        if !is_gpu {
            continue;
        }
        let lpath = dir.join("local_cpulist");
        let local_cpus = match read_opt(&lpath)? {
            Some(t) => Some(parse_list_file(&lpath, &t)?),
            None => None,
        };
        out.insert(name, PciGpu { vendor, local_cpus });
    }
    Ok(out)
}

fn gpus(root: &Path, allowed: Option<&IdSet>) -> Result<usize, TopoError> {
    let pci = pci_gpus(root)?;
    let visible = |g: &PciGpu| match (allowed, &g.local_cpus) {
        (Some(a), Some(l)) if !l.is_empty() => l.intersects(a),
        _ => true,
    };

    // NVIDIA: one GPU per PCI device (CUDA, NVML and OpenCL views dedup to one).
    let mut nvidia = pci
        .values()
        .filter(|g| g.vendor == 0x10de && visible(g))
        .count();
    if nvidia == 0 && !pci.values().any(|g| g.vendor == 0x10de) {
        for (busid, _) in list_dir(&root.join("proc/driver/nvidia/gpus"))? {
            let lpath = root
                .join("sys/bus/pci/devices")
                .join(&busid)
                .join("local_cpulist");
            let local_cpus = match read_opt(&lpath)? {
                Some(t) => Some(parse_list_file(&lpath, &t)?),
                None => None,
            };
            let g = PciGpu {
                vendor: 0x10de,
                local_cpus,
            };
            if visible(&g) {
                nvidia += 1;
            }
        }
    }

    // AMD: KFD compute nodes (one per partition), else PCI devices.
    let mut kfd = 0usize;
    for (_, node) in list_dir(&root.join("sys/class/kfd/kfd/topology/nodes"))? {
        let Some(props) = read_opt(&node.join("properties"))? else {
            continue;
        };
        let simd = props.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            match (it.next(), it.next()) {
                (Some("simd_count"), Some(v)) => v.parse::<u64>().ok(),
                _ => None,
            }
        });
        if simd.unwrap_or(0) > 0 {
            kfd += 1;
        }
    }
    let amd = if kfd > 0 {
        kfd
    } else {
        pci.values()
            .filter(|g| g.vendor == 0x1002 && visible(g))
            .count()
    };
    Ok(nvidia + amd)
}

/// Discover the machine whose `/` is `root` (see the module documentation).
pub(crate) fn discover(root: &Path) -> Result<Topology, TopoError> {
    let cores = cores(root)?;
    let allowed = affinity(root)?;
    let kept = match &allowed {
        Some(a) => {
            let n = cores.iter().filter(|c| c.cpus.intersects(a)).count();
            if n == 0 {
                let online = cores.iter().fold(IdSet::new(), |acc, c| acc.union(&c.cpus));
                return Err(TopoError::EmptyBinding {
                    binding: a.encode(),
                    online: online.encode(),
                });
            }
            n
        }
        None => cores.len(),
    };
    Ok(Topology {
        hostname: kernel_hostname(root)?,
        cores: dense(kept),
        gpus: dense(gpus(root, allowed.as_ref())?),
    })
}
