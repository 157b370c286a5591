//! A simulated disk for tests: an [`Fs`] that models the page cache.
//!
//! Every file has two contents: what the process sees (the cache) and
//! what is on the platter (durable).  `fdatasync`/`fsync` of a file copies
//! its cache to its durable content.  Directory entries (creations,
//! renames, removals) are likewise kept twice per directory and become
//! durable only when that directory is fsynced; a new directory itself
//! becomes durable when its parent is fsynced.
//!
//! [`SimDisk::power_loss`] keeps only what is durable, except that, as a
//! real disk may, an unsynced append to a file can partly reach the
//! platter: its first bytes (a torn write), a block of zeros in its place
//! (the size was updated, the data was not), or the whole tail with a
//! zeroed block in the middle; likewise an unsynced overwrite (`pwrite`
//! into bytes already durable) can reach it up to some point, or all but
//! one block, the platter keeping the old bytes there.  The choice is made with a seeded
//! generator ([`Rng`]), so that a run is reproducible.
//!
//! Faults: [`SimDisk::fail_op`] makes the n-th operation fail with
//! `ENOSPC` or `EIO` (a failing write writes half of its bytes first);
//! [`SimDisk::crash_after`] makes every operation after the n-th fail with
//! `EIO`, which models the process dying at that point (nothing more
//! reaches the disk) until [`SimDisk::power_loss`] restarts the machine.
//!
//! Operations counted (each one a possible crash point): writes, syncs,
//! truncations, creations, renames, removals and directory syncs.  Reads
//! are not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::fs::{parent_of, Fs, FsFile};

/// A small deterministic pseudo-random generator (splitmix64), so that
/// simulation runs are reproducible from a seed without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
    /// True with probability `num/den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }
}

/// An injected error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `EIO`.
    Eio,
    /// `ENOSPC`.
    Enospc,
}

impl Fault {
    fn error(self) -> io::Error {
        io::Error::from_raw_os_error(match self {
            Fault::Eio => libc::EIO,
            Fault::Enospc => libc::ENOSPC,
        })
    }
}

#[derive(Debug, Clone, Default)]
struct Inode {
    cache: Vec<u8>,
    durable: Vec<u8>,
}

#[derive(Debug, Default)]
struct Inner {
    inodes: Vec<Inode>,
    /// Visible names → inode.
    names: BTreeMap<PathBuf, usize>,
    /// Durable names → inode.
    durable_names: BTreeMap<PathBuf, usize>,
    dirs: BTreeSet<PathBuf>,
    durable_dirs: BTreeSet<PathBuf>,
    /// Operations done so far.
    ops: u64,
    /// Operation number → fault.
    faults: BTreeMap<u64, Fault>,
    /// Every operation numbered above this fails (the process is dead).
    crash_after: Option<u64>,
    /// Bumped at each power loss: older handles stop working.
    generation: u64,
    locked: BTreeSet<PathBuf>,
    /// Each operation, for debugging a failing seed.
    trace: Vec<String>,
    tracing: bool,
}

impl Inner {
    /// Count one operation; fail it if it is faulty or after the crash.
    fn op(&mut self, what: &str, path: &Path) -> io::Result<()> {
        self.ops += 1;
        if self.tracing {
            self.trace
                .push(format!("{} {what} {}", self.ops, path.display()));
        }
        if self.crash_after.is_some_and(|n| self.ops > n) {
            return Err(Fault::Eio.error());
        }
        if let Some(f) = self.faults.remove(&self.ops) {
            return Err(f.error());
        }
        Ok(())
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        self.dirs.contains(dir)
    }

    /// A new empty file at `path`: its inode.
    fn create(&mut self, path: &Path) -> io::Result<usize> {
        self.check_parent(path)?;
        self.op("create", path)?;
        self.inodes.push(Inode::default());
        self.names.insert(path.to_path_buf(), self.inodes.len() - 1);
        Ok(self.inodes.len() - 1)
    }

    fn check_parent(&self, path: &Path) -> io::Result<()> {
        if self.dir_exists(&parent_of(path)) {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(libc::ENOENT))
        }
    }
}

/// The simulated disk (cheap to clone: clones share the disk).
#[derive(Debug, Clone)]
pub struct SimDisk(Arc<Mutex<Inner>>);

impl Default for SimDisk {
    fn default() -> Self {
        SimDisk::new()
    }
}

fn not_found() -> io::Error {
    io::Error::from_raw_os_error(libc::ENOENT)
}

impl SimDisk {
    /// An empty disk whose only directories are `/` and `/sim` (durable).
    pub fn new() -> SimDisk {
        let mut inner = Inner::default();
        for d in ["/", "/sim"] {
            inner.dirs.insert(PathBuf::from(d));
            inner.durable_dirs.insert(PathBuf::from(d));
        }
        SimDisk(Arc::new(Mutex::new(inner)))
    }

    /// An open handle on `inode`, named `path`.
    fn file(&self, g: &Inner, inode: usize, path: &Path) -> Box<dyn FsFile> {
        Box::new(SimFile {
            disk: self.clone(),
            generation: g.generation,
            inode,
            path: path.to_path_buf(),
        })
    }

    fn inner(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Operations done so far.
    pub fn ops(&self) -> u64 {
        self.inner().ops
    }

    /// Make operation number `n` (counting from the disk's creation, see
    /// [`SimDisk::ops`]) fail with `fault`.
    pub fn fail_op(&self, n: u64, fault: Fault) {
        self.inner().faults.insert(n, fault);
    }

    /// Forget the faults not yet triggered.
    pub fn clear_faults(&self) {
        self.inner().faults.clear();
    }

    /// Let `n` more operations happen; every later one fails with `EIO`
    /// (the machine is down) until [`SimDisk::power_loss`].
    pub fn crash_after(&self, n: u64) {
        let mut g = self.inner();
        g.crash_after = Some(g.ops + n);
    }

    /// Remove the crash point set by [`SimDisk::crash_after`] (if not
    /// reached yet, nothing happens).
    pub fn disarm(&self) {
        self.inner().crash_after = None;
    }

    /// Record every operation (see [`SimDisk::trace`]).
    pub fn set_tracing(&self, on: bool) {
        self.inner().tracing = on;
    }

    /// The operations recorded since tracing was turned on.
    pub fn trace(&self) -> Vec<String> {
        self.inner().trace.clone()
    }

    /// Power loss and restart: only durable names and contents remain,
    /// except that an unsynced append may partly survive (see the module
    /// documentation; `rng` decides).  Open handles become invalid, locks
    /// are released, pending faults and the crash point are cleared.
    pub fn power_loss(&self, rng: &mut Rng) {
        let mut g = self.inner();
        let g = &mut *g;
        g.generation += 1;
        g.crash_after = None;
        g.faults.clear();
        g.locked.clear();
        // Directories: durable ones whose parent is durable too.
        let dirs: BTreeSet<PathBuf> = g.durable_dirs.clone();
        let alive = |p: &Path| {
            let mut cur = p.parent();
            while let Some(d) = cur {
                if d.as_os_str().is_empty() {
                    break;
                }
                if !dirs.contains(d) {
                    return false;
                }
                cur = d.parent();
            }
            true
        };
        let dirs: BTreeSet<PathBuf> = dirs.iter().filter(|d| alive(d)).cloned().collect();
        let names: BTreeMap<PathBuf, usize> = g
            .durable_names
            .iter()
            .filter(|(p, _)| alive(p))
            .map(|(p, i)| (p.clone(), *i))
            .collect();
        let mut inodes = Vec::new();
        let mut new_names = BTreeMap::new();
        let mut seen = BTreeMap::new();
        for (p, i) in names {
            let idx = *seen.entry(i).or_insert_with(|| {
                let ino = &g.inodes[i];
                let content = surviving(&ino.durable, &ino.cache, rng);
                inodes.push(Inode {
                    cache: content.clone(),
                    durable: content,
                });
                inodes.len() - 1
            });
            new_names.insert(p, idx);
        }
        g.inodes = inodes;
        g.names = new_names.clone();
        g.durable_names = new_names;
        g.dirs = dirs.clone();
        g.durable_dirs = dirs;
    }

    /// What the process would read at `path` (the cache), if it exists.
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let g = self.inner();
        g.names.get(path).map(|&i| g.inodes[i].cache.clone())
    }

    /// Overwrite a file's content, durably (test set-up).
    pub fn put(&self, path: &Path, bytes: &[u8]) {
        let mut g = self.inner();
        let g = &mut *g;
        let idx = match g.names.get(path) {
            Some(&i) => i,
            None => {
                g.inodes.push(Inode::default());
                g.inodes.len() - 1
            }
        };
        g.inodes[idx] = Inode {
            cache: bytes.to_vec(),
            durable: bytes.to_vec(),
        };
        g.names.insert(path.to_path_buf(), idx);
        g.durable_names.insert(path.to_path_buf(), idx);
    }
}

/// The content of a file after a power loss.
fn surviving(durable: &[u8], cache: &[u8], rng: &mut Rng) -> Vec<u8> {
    if cache.len() > durable.len() && cache.starts_with(durable) {
        if rng.chance(1, 2) {
            return surviving_append(durable, &cache[durable.len()..], rng);
        }
        return durable.to_vec();
    }
    if cache.len() >= durable.len() && cache != durable && rng.chance(1, 2) {
        return surviving_overwrite(durable, cache, rng);
    }
    durable.to_vec()
}

/// An unsynced append of `tail` after `durable`, partly on the platter.
fn surviving_append(durable: &[u8], tail: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut out = durable.to_vec();
    match rng.below(4) {
        // A torn write: a prefix of the tail.
        0 => {
            let k = rng.below(tail.len() as u64 + 1) as usize;
            out.extend_from_slice(&tail[..k]);
        }
        // The size reached the disk, not the data.
        1 => {
            let k = 1 + rng.below(tail.len() as u64) as usize;
            out.extend(std::iter::repeat_n(0u8, k));
        }
        // The whole tail, but one block of it zeroed.
        2 => {
            let a = rng.below(tail.len() as u64) as usize;
            let b = a + 1 + rng.below((tail.len() - a) as u64) as usize;
            let mut t = tail.to_vec();
            t[a..b].iter_mut().for_each(|x| *x = 0);
            out.extend_from_slice(&t);
        }
        // All of it made it.
        _ => out.extend_from_slice(tail),
    }
    out
}

/// Unsynced writes over durable bytes (and perhaps past their end: `cache`
/// is not shorter than `durable`), partly on the platter: where a block
/// did not make it, the platter still holds the old bytes (zeros past the
/// old end).
fn surviving_overwrite(durable: &[u8], cache: &[u8], rng: &mut Rng) -> Vec<u8> {
    let old = |i: usize| durable.get(i).copied().unwrap_or(0);
    let changed: Vec<usize> = (0..cache.len()).filter(|&i| cache[i] != old(i)).collect();
    let (Some(&a), Some(&last)) = (changed.first(), changed.last()) else {
        // Only the size grew, with zeros.
        return if rng.chance(1, 2) {
            cache.to_vec()
        } else {
            durable.to_vec()
        };
    };
    let b = last + 1;
    let mut out = cache.to_vec();
    let revert = |out: &mut Vec<u8>, from: usize, to: usize| {
        for (i, x) in out.iter_mut().enumerate().take(to).skip(from) {
            *x = old(i);
        }
    };
    match rng.below(3) {
        // A torn write: the changes up to some point, then the old bytes.
        0 => {
            let k = a + rng.below((b - a) as u64 + 1) as usize;
            revert(&mut out, k, b);
        }
        // All of it, but one block still old.
        1 => {
            let x = a + rng.below((b - a) as u64) as usize;
            let y = x + 1 + rng.below((b - x) as u64) as usize;
            revert(&mut out, x, y);
        }
        // All of it made it.
        _ => {}
    }
    out
}

#[derive(Debug)]
struct SimFile {
    disk: SimDisk,
    generation: u64,
    inode: usize,
    path: PathBuf,
}

impl SimFile {
    fn with<T>(&self, what: &str, f: impl FnOnce(&mut Inode) -> T) -> io::Result<T> {
        let mut g = self.disk.inner();
        if g.generation != self.generation {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        g.op(what, &self.path)?;
        Ok(f(&mut g.inodes[self.inode]))
    }
}

/// Write `bytes` at `offset` of `cache` (zeros fill a gap).
fn put(cache: &mut Vec<u8>, offset: usize, bytes: &[u8]) {
    let end = offset + bytes.len();
    if cache.len() < end {
        cache.resize(end, 0);
    }
    cache[offset..end].copy_from_slice(bytes);
}

impl SimFile {
    /// A write at `offset` (`None`: at the end).
    fn write(&mut self, offset: Option<u64>, bytes: &[u8]) -> io::Result<()> {
        let mut g = self.disk.inner();
        if g.generation != self.generation {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        let dead = g.crash_after.is_some_and(|n| g.ops >= n);
        let r = g.op("write", &self.path);
        // A failing write (not a dead machine) writes half.
        let done = match &r {
            Ok(()) => bytes,
            Err(_) if !dead => &bytes[..bytes.len() / 2],
            Err(_) => &[],
        };
        let cache = &mut g.inodes[self.inode].cache;
        let at = offset.map_or(cache.len(), |o| o as usize);
        if !done.is_empty() {
            put(cache, at, done);
        }
        r
    }
}

impl FsFile for SimFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.write(None, bytes)
    }
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        self.write(Some(offset), bytes)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.with("fdatasync", |i| i.durable = i.cache.clone())
    }
    fn sync_all(&mut self) -> io::Result<()> {
        self.with("fsync", |i| i.durable = i.cache.clone())
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.with("ftruncate", |i| i.cache.resize(len as usize, 0))
    }
}

#[derive(Debug)]
struct SimLock {
    disk: SimDisk,
    generation: u64,
    dir: PathBuf,
}

impl Drop for SimLock {
    fn drop(&mut self) {
        let mut g = self.disk.inner();
        if g.generation == self.generation {
            g.locked.remove(&self.dir);
        }
    }
}

impl Fs for SimDisk {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        let mut missing = Vec::new();
        {
            let g = self.inner();
            let mut cur = Some(dir);
            while let Some(d) = cur {
                if d.as_os_str().is_empty() || g.dirs.contains(d) {
                    break;
                }
                if g.names.contains_key(d) {
                    return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
                }
                missing.push(d.to_path_buf());
                cur = d.parent();
            }
        }
        for d in missing.iter().rev() {
            {
                let mut g = self.inner();
                g.op("mkdir", d)?;
                g.dirs.insert(d.clone());
            }
            self.sync_dir(&parent_of(d))?;
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        let mut g = self.inner();
        let g = &mut *g;
        g.op("fsync directory", dir)?;
        if !g.dirs.contains(dir) {
            return Err(not_found());
        }
        let in_dir = |p: &PathBuf| parent_of(p) == dir;
        g.durable_names.retain(|p, _| !in_dir(p));
        for (p, i) in g.names.iter().filter(|(p, _)| in_dir(p)) {
            g.durable_names.insert(p.clone(), *i);
        }
        g.durable_dirs.retain(|p| !in_dir(p));
        for p in g.dirs.iter().filter(|p| in_dir(p)) {
            g.durable_dirs.insert(p.clone());
        }
        g.durable_dirs.insert(dir.to_path_buf());
        Ok(())
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let g = self.inner();
        if g.crash_after.is_some_and(|n| g.ops >= n) {
            return Err(Fault::Eio.error());
        }
        g.names
            .get(path)
            .map(|&i| g.inodes[i].cache.clone())
            .ok_or_else(not_found)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        let g = self.inner();
        Ok(g.names.contains_key(path) || g.dirs.contains(path))
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let g = self.inner();
        if !g.dirs.contains(dir) {
            return Err(not_found());
        }
        let names = g.names.keys().chain(g.dirs.iter());
        Ok(names
            .filter(|p| p.as_path() != dir && parent_of(p) == dir)
            .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect())
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let mut g = self.inner();
        let inode = match g.names.get(path) {
            Some(&i) => i,
            None => g.create(path)?,
        };
        Ok(self.file(&g, inode, path))
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        let mut g = self.inner();
        if g.names.contains_key(path) || g.dirs.contains(path) {
            return Err(io::Error::from_raw_os_error(libc::EEXIST));
        }
        let inode = g.create(path)?;
        Ok(self.file(&g, inode, path))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut g = self.inner();
        let i = *g.names.get(from).ok_or_else(not_found)?;
        g.check_parent(to)?;
        g.op("rename", to)?;
        g.names.remove(from);
        g.names.insert(to.to_path_buf(), i);
        Ok(())
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        let mut g = self.inner();
        if !g.names.contains_key(path) {
            return Err(not_found());
        }
        g.op("unlink", path)?;
        g.names.remove(path);
        Ok(())
    }

    fn lock(&self, dir: &Path) -> io::Result<Result<Box<dyn Debug + Send + Sync>, Option<u32>>> {
        let mut g = self.inner();
        if !g.dirs.contains(dir) {
            return Err(not_found());
        }
        if !g.locked.insert(dir.to_path_buf()) {
            return Ok(Err(None));
        }
        Ok(Ok(Box::new(SimLock {
            disk: self.clone(),
            generation: g.generation,
            dir: dir.to_path_buf(),
        })))
    }
}
