//! The state directory of `roster serve`: what flux-core keeps in the KVS
//! under `resource.R`, `resource.eventlog` and `checkpoint.resource`.
//!
//! | file | content | written by |
//! |---|---|---|
//! | `resource.eventlog` | RFC 18 eventlog, one event per line | [`StateDir::append`] (group commit), [`StateDir::rewrite_eventlog`] |
//! | `resource.R` | the instance R, JSON text | [`StateDir::write_r`] |
//! | `checkpoint.resource` | drain checkpoint, JSON | [`StateDir::write_checkpoint`], [`StateDir::remove_checkpoint`] |
//! | `lock` | pid of the holder | [`StateDir::open`] |
//!
//! # Durability
//!
//! * [`StateDir::append`] writes all lines of a batch with one `write` and
//!   makes them durable with one `fdatasync` before returning `Ok` (group
//!   commit: the daemon acknowledges a batch of requests only after
//!   that).  If the write fails the file is cut back to its previous
//!   length and the batch is forgotten, so a later append cannot commit
//!   it by accident.  After a failed `fdatasync` the log refuses further
//!   appends (the kernel may have dropped the data); the daemon must stop
//!   and reopen the directory.
//! * A crash can leave at most a torn last line.  [`StateDir::open`]
//!   removes it and reports it in [`Loaded::warnings`]; the next append
//!   starts on a clean line.  Any other malformed line is an error
//!   (`resource.eventlog line N: ...`).
//! * Whole files (`resource.R`, the checkpoint, a rewritten eventlog) are
//!   replaced atomically: temporary file, fsync, rename, directory fsync.
//!   Temporary files left by a crash are deleted at open (and reported as
//!   warnings).
//!
//! # Exclusion
//!
//! [`StateDir::open`] takes an exclusive `flock` on `DIR/lock`, held until
//! the [`StateDir`] is dropped, and writes its pid there; a second daemon
//! on the same directory fails with
//! `state directory DIR is in use by another roster serve (pid N)`.
//!
//! # History truncation
//!
//! [`history_cutoff`] and [`truncate_history`] implement flux-core's
//! start-time truncation of `resource.eventlog` (the `history` setting
//! and the drain checkpoint) as pure functions; the caller rewrites the
//! log with [`StateDir::rewrite_eventlog`].

mod history;

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use eventlog::{Event, EventLogError, EventLogFile};
use serde_json::Value;

pub use history::{checkpoint_timestamp, history_cutoff, truncate_history};

/// Name of the eventlog file.
pub const EVENTLOG_FILE: &str = "resource.eventlog";
/// Name of the R file.
pub const R_FILE: &str = "resource.R";
/// Name of the drain checkpoint file.
pub const CHECKPOINT_FILE: &str = "checkpoint.resource";
/// Name of the lock file.
pub const LOCK_FILE: &str = "lock";

/// Errors of the state directory.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Another process holds the directory's lock.
    #[error("state directory {} is in use by another roster serve (pid {})", dir.display(), pid.map_or_else(|| "unknown".to_string(), |p| p.to_string()))]
    Locked {
        /// The state directory.
        dir: PathBuf,
        /// The holder's pid, as written in the lock file.
        pid: Option<u32>,
    },
    /// An I/O operation failed.
    #[error("{}: {op}: {}", path.display(), io_text(source))]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The eventlog is corrupt, or writing it failed.
    #[error(transparent)]
    EventLog(#[from] EventLogError),
    /// A file that must hold UTF-8 text does not.
    #[error("{}: not valid UTF-8 text", path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
    },
    /// The checkpoint file is not valid JSON.
    #[error("{}: invalid JSON: {reason}", path.display())]
    Checkpoint {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
}

/// strerror-style text, without Rust's " (os error N)".
fn io_text(e: &io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s.get(..i).unwrap_or(&s).to_string(),
        None => s,
    }
}

fn io_err<'a>(path: &'a Path, op: &'static str) -> impl FnOnce(io::Error) -> StoreError + 'a {
    move |source| StoreError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// What [`StateDir::open`] found.
#[derive(Debug, Default)]
pub struct Loaded {
    /// Every event of `resource.eventlog`, in order.
    pub events: Vec<Event>,
    /// `resource.R` as raw text (the caller parses it).
    pub r: Option<String>,
    /// `checkpoint.resource`.
    pub checkpoint: Option<Value>,
    /// Things repaired while opening, worth logging: a discarded torn last
    /// line, deleted temporary files.
    pub warnings: Vec<String>,
}

/// An open, locked state directory.
#[derive(Debug)]
pub struct StateDir {
    dir: PathBuf,
    log: EventLogFile,
    /// Holds the flock; released when dropped.
    _lock: File,
}

/// Take the directory lock, or say who holds it.
fn lock(dir: &Path) -> Result<File, StoreError> {
    let path = dir.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_err(&path, "open"))?;
    // SAFETY: flock on a file descriptor owned by `file`, which is alive.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
            let mut text = String::new();
            let pid = file
                .read_to_string(&mut text)
                .ok()
                .and_then(|_| text.trim().parse().ok());
            return Err(StoreError::Locked {
                dir: dir.to_path_buf(),
                pid,
            });
        }
        return Err(StoreError::Io {
            path,
            op: "lock",
            source: e,
        });
    }
    file.set_len(0)
        .and_then(|_| file.rewind())
        .and_then(|_| writeln!(file, "{}", std::process::id()))
        .map_err(io_err(&path, "write pid"))?;
    Ok(file)
}

/// Read a whole file, `None` if it does not exist.
fn read_optional(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io {
            path: path.to_path_buf(),
            op: "read",
            source: e,
        }),
    }
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir, "fsync directory"))
}

impl StateDir {
    /// Open the state directory `dir`, creating it (mode 0700) if needed,
    /// lock it, and read its content (see the crate documentation).
    pub fn open(dir: &Path) -> Result<(StateDir, Loaded), StoreError> {
        let dir = dir.to_path_buf();
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(io_err(&dir, "create state directory"))?;
        let lock_file = lock(&dir)?;

        let mut warnings = Vec::new();
        let opened = EventLogFile::open(dir.join(EVENTLOG_FILE))?;
        if let Some(t) = &opened.torn {
            warnings.push(t.to_string());
        }
        let mut removed = opened.removed_temp_files;
        for name in [R_FILE, CHECKPOINT_FILE] {
            removed.extend(eventlog::remove_stale_temp_files(dir.join(name))?);
        }
        for p in removed {
            warnings.push(format!(
                "{}: removed a temporary file left by an interrupted write",
                p.display()
            ));
        }

        let r_path = dir.join(R_FILE);
        let r = match read_optional(&r_path)? {
            None => None,
            Some(b) => {
                Some(String::from_utf8(b).map_err(|_| StoreError::NotUtf8 { path: r_path })?)
            }
        };
        let ck_path = dir.join(CHECKPOINT_FILE);
        let checkpoint =
            match read_optional(&ck_path)? {
                None => None,
                Some(b) => Some(serde_json::from_slice::<Value>(&b).map_err(|e| {
                    StoreError::Checkpoint {
                        path: ck_path,
                        reason: e.to_string(),
                    }
                })?),
            };
        let loaded = Loaded {
            events: opened.events,
            r,
            checkpoint,
            warnings,
        };
        Ok((
            StateDir {
                dir,
                log: opened.log,
                _lock: lock_file,
            },
            loaded,
        ))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `resource.eventlog`.
    pub fn eventlog_path(&self) -> &Path {
        self.log.path()
    }

    /// Number of events durably in `resource.eventlog`.
    pub fn event_count(&self) -> usize {
        self.log.event_count()
    }

    /// Size of `resource.eventlog` in bytes.
    pub fn eventlog_len(&self) -> u64 {
        self.log.byte_len()
    }

    /// Append `events` durably: one `write` of all their lines and one
    /// `fdatasync` (nothing at all for an empty slice).  Returns only once
    /// they are on disk.  On error none of them is in the log (a partly
    /// written batch is cut off), except after a failed `fdatasync`, when
    /// their fate is unknown and every later call fails: reopen.
    pub fn append(&mut self, events: &[Event]) -> Result<(), StoreError> {
        match self.log.append_batch(events) {
            Ok(()) => Ok(()),
            Err(e) => {
                // The eventlog keeps a failed batch staged for a retry; the
                // daemon has already refused those requests, so drop it.
                self.log.discard_staged();
                Err(e.into())
            }
        }
    }

    /// Replace `resource.eventlog` with `events` atomically (history
    /// truncation at start).
    pub fn rewrite_eventlog(&mut self, events: &[Event]) -> Result<(), StoreError> {
        self.log.rewrite(events).map_err(StoreError::from)
    }

    /// Replace `resource.R` atomically and durably.
    pub fn write_r(&mut self, r_json: &str) -> Result<(), StoreError> {
        eventlog::write_file_atomic(self.dir.join(R_FILE), r_json.as_bytes())?;
        Ok(())
    }

    /// Replace `checkpoint.resource` atomically and durably (compact JSON
    /// and a newline).
    pub fn write_checkpoint(&mut self, v: &Value) -> Result<(), StoreError> {
        let mut text = v.to_string();
        text.push('\n');
        eventlog::write_file_atomic(self.dir.join(CHECKPOINT_FILE), text.as_bytes())?;
        Ok(())
    }

    /// Remove `checkpoint.resource` durably (no error if there is none).
    pub fn remove_checkpoint(&mut self) -> Result<(), StoreError> {
        let path = self.dir.join(CHECKPOINT_FILE);
        match fs::remove_file(&path) {
            Ok(()) => sync_dir(&self.dir),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::Io {
                path,
                op: "remove",
                source: e,
            }),
        }
    }
}

#[cfg(test)]
mod tests;
