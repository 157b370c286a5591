//! The file operations the state directory needs, behind a trait, so that
//! tests can run the store on a simulated disk ([`crate::sim::SimDisk`])
//! that loses what was not synced, tears writes and fails on demand.
//!
//! The real implementation is [`RealFs`].  Every method maps to one or two
//! system calls; nothing is buffered in user space.

use std::fmt::Debug;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// An open file, for writing.
pub trait FsFile: Send + Debug {
    /// Write all of `bytes` at the current position (of a file from
    /// [`Fs::create_new`]: its end).  On error, part of the bytes may have
    /// been written.
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()>;
    /// Write all of `bytes` at `offset` (`pwrite`), extending the file if
    /// they reach past its end.  On error, part of the bytes may have been
    /// written.
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()>;
    /// `fdatasync`.
    fn sync_data(&mut self) -> io::Result<()>;
    /// `fsync`.
    fn sync_all(&mut self) -> io::Result<()>;
    /// `ftruncate`.
    fn set_len(&mut self, len: u64) -> io::Result<()>;
}

/// The file system operations of the state directory (see the module
/// documentation).  Paths are absolute or relative to the process's
/// working directory, as for `std::fs`.
pub trait Fs: Send + Sync + Debug {
    /// Create `dir` (mode 0700) and its missing parents.  For every
    /// directory created, its parent directory is fsynced, so that the new
    /// entry survives a power loss.  No error if `dir` exists.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// `fsync` a directory (makes its entries durable: creations, renames,
    /// removals).
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
    /// Read a whole file (`NotFound` if there is none).
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Whether `path` exists (`lstat`).
    fn exists(&self, path: &Path) -> io::Result<bool>;
    /// The names of the entries of a directory.
    fn list(&self, dir: &Path) -> io::Result<Vec<String>>;
    /// Open a file for writing at chosen offsets ([`FsFile::write_at`];
    /// not in append mode), creating it (mode 0600) if needed.
    fn open_write(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// Create a new file for writing (`O_EXCL`, mode 0600):
    /// `AlreadyExists` if there is one.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>>;
    /// `rename(2)`.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// `unlink(2)`.
    fn remove(&self, path: &Path) -> io::Result<()>;
    /// Take the exclusive lock of the state directory `dir` (the file
    /// `dir/lock`, holding the pid).  `Ok(Err(pid))` when another process
    /// holds it.  The lock is held until the returned guard is dropped.
    fn lock(&self, dir: &Path) -> io::Result<Result<Box<dyn Debug + Send + Sync>, Option<u32>>>;
}

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

#[derive(Debug)]
struct RealFile(File);

impl FsFile for RealFile {
    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.0.write_all(bytes)
    }
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(&self.0, bytes, offset)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
    fn sync_all(&mut self) -> io::Result<()> {
        self.0.sync_all()
    }
    fn set_len(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }
}

/// The parent directory of `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Open `path` with `o`; a file it creates is its owner's only (0600).
fn open_private(o: &mut OpenOptions, path: &Path) -> io::Result<Box<dyn FsFile>> {
    Ok(Box::new(RealFile(o.mode(0o600).open(path)?)))
}

impl Fs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        // The missing ancestors, outermost first.
        let mut missing = Vec::new();
        let mut cur = Some(dir);
        while let Some(d) = cur {
            if d.as_os_str().is_empty() || fs::symlink_metadata(d).is_ok() {
                break;
            }
            missing.push(d.to_path_buf());
            cur = d.parent();
        }
        for d in missing.iter().rev() {
            match fs::DirBuilder::new().mode(0o700).create(d) {
                Ok(()) => {
                    // 0700 whatever the umask (which can only take bits
                    // away, owner ones included).
                    fs::set_permissions(d, fs::Permissions::from_mode(0o700))?;
                    self.sync_dir(&parent_of(d))?
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(e),
            }
        }
        if !fs::metadata(dir)?.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
        }
        Ok(())
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        fs::read(path)
    }

    fn exists(&self, path: &Path) -> io::Result<bool> {
        match fs::symlink_metadata(path) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for ent in fs::read_dir(dir)? {
            names.push(ent?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }

    fn open_write(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        open_private(
            OpenOptions::new().write(true).create(true).truncate(false),
            path,
        )
    }

    fn create_new(&self, path: &Path) -> io::Result<Box<dyn FsFile>> {
        open_private(OpenOptions::new().write(true).create_new(true), path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn remove(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn lock(&self, dir: &Path) -> io::Result<Result<Box<dyn Debug + Send + Sync>, Option<u32>>> {
        use std::io::{Read, Seek};
        use std::os::fd::AsRawFd;
        let path = dir.join(crate::LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        // SAFETY: flock on a file descriptor owned by `file`, which is alive.
        #[allow(unsafe_code)] // flock(2): std has no non-blocking lock on Rust 1.80
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                let mut text = String::new();
                let pid = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| text.trim().parse().ok());
                return Ok(Err(pid));
            }
            return Err(e);
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(Ok(Box::new(file)))
    }
}
