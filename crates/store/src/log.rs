//! Crash-safe files over an [`Fs`]: an append-only eventlog with group
//! commit, and atomic whole-file replacement.  (Moved here from the
//! `eventlog` crate, which keeps only the codec and does no IO.)
//!
//! Durability rules:
//!
//! * An append (or a [`EventLogFile::commit`] of staged events) returns `Ok`
//!   only after one `write` of all the lines and one `fdatasync`.
//! * The file is preallocated: [`EventLogFile::reserve`] writes (and
//!   syncs) a run of zero bytes past the last event, and appends overwrite
//!   that run in place, so that the `fdatasync` of an append has only the
//!   new data to write, not the file's size as well (one disk write
//!   instead of two; see bench/RESULTS.md).  Zeros are what a real event
//!   line never holds, so an unsynced overwrite that only partly reached
//!   the disk still shows as a line holding a NUL byte (below).  At rest
//!   after a clean stop ([`EventLogFile::trim`]) the file ends with its
//!   last event; while the service runs, or after a crash, it ends with up
//!   to [`RESERVE_CHUNK`] zero bytes, which [`EventLogFile::open`] takes
//!   as the preallocated run (no warning).
//! * A crash can leave an unsynced tail: the last line partly written, or
//!   (when the file size reached the disk but not the data) a block of
//!   zero bytes, possibly followed by more text and newlines.  Because
//!   every write ends with `\n`, a log whose last line has no newline was
//!   torn; a line holding a NUL byte cannot be an event and marks where
//!   unsynced data begins.  [`EventLogFile::open`] drops such a tail (from
//!   the first NUL-bearing line, or the unterminated last line, to the end
//!   of the file, even if parts of it happen to be valid JSON: their
//!   append never returned `Ok`), truncates the file back to the last
//!   complete line before it, and reports a [`TornTail`] warning.  Any
//!   other undecodable line is corruption and an error naming the line.
//!   (flux-core's `eventlog_decode()` would instead refuse a log made of a
//!   single unterminated line and silently ignore a tail after a newline.)
//! * Whole-file replacement ([`write_file_atomic`], [`EventLogFile::rewrite`])
//!   writes a temporary file `.<name>.tmp.<pid>.<n>` in the same directory,
//!   fsyncs it, renames it over the target and fsyncs the directory.  A
//!   temporary file left by a crash is never read; [`EventLogFile::open`]
//!   and [`remove_stale_temp_files`] delete them.
//! * One process writes a given file at a time (the caller's job, e.g. a
//!   lock on the state directory).

use std::borrow::Borrow;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use eventlog::{Event, EventError};

use crate::fs::{parent_of, Fs, FsFile};

/// Errors from eventlog files.
#[derive(Debug, thiserror::Error)]
pub enum EventLogError {
    /// A complete line of the log is not a valid event.
    #[error("{label} line {line}: {reason}")]
    Corrupt {
        label: String,
        line: usize,
        reason: EventError,
    },
    /// An I/O operation failed.
    #[error("{}: {op}: {}", path.display(), crate::io_text(source))]
    Io {
        path: PathBuf,
        op: &'static str,
        #[source]
        source: io::Error,
    },
    /// An event could not be encoded (a non-finite timestamp); nothing was written.
    #[error("{label}: cannot append event '{name}': {reason}")]
    Encode {
        label: String,
        name: String,
        reason: EventError,
    },
    /// An earlier failure left the on-disk state unknown; reopen the log.
    #[error("{label}: unusable after a failed write, sync or rewrite; reopen it")]
    Poisoned { label: String },
}

fn io_error(path: &Path, op: &'static str, source: io::Error) -> EventLogError {
    EventLogError::Io {
        path: path.to_path_buf(),
        op,
        source,
    }
}

/// A torn tail found and removed by [`EventLogFile::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The log's file name, as used in messages.
    pub label: String,
    /// The (1-based) line number where the dropped text starts.
    pub line: usize,
    /// How many bytes were dropped.
    pub bytes: u64,
    /// Whether the dropped text was one complete, valid event lacking only its newline.
    pub was_valid_event: bool,
    /// Whether the dropped text held zero bytes (an unsynced block).
    pub zeroed: bool,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.zeroed {
            return write!(
                f,
                "{} line {}: discarded a torn tail ({} bytes from a line holding zero bytes: an unsynced block of an interrupted append)",
                self.label, self.line, self.bytes
            );
        }
        write!(
            f,
            "{} line {}: discarded a torn last line ({} bytes without a trailing newline{})",
            self.label,
            self.line,
            self.bytes,
            if self.was_valid_event {
                ", a valid event whose append was never acknowledged"
            } else {
                ""
            }
        )
    }
}

/// 64-bit FNV-1a, continued from `h` (start with [`FNV_START`]).  Stable
/// across versions: the drain checkpoint records it.
pub fn fnv1a(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The FNV-1a offset basis.
pub const FNV_START: u64 = 0xcbf2_9ce4_8422_2325;

/// What [`EventLogFile::open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The log, ready for appends.
    pub log: EventLogFile,
    /// Every event in the log, in file order.
    pub events: Vec<Event>,
    /// `prefix_hashes[n]`: [`fnv1a`] of the first `n` lines (with their
    /// newlines); `events.len() + 1` entries.
    pub prefix_hashes: Vec<u64>,
    /// Set when a torn tail was discarded (worth a warning in the log).
    pub torn: Option<TornTail>,
    /// Temporary files of interrupted rewrites that were deleted.
    pub removed_temp_files: Vec<PathBuf>,
}

/// How much zeroed room [`EventLogFile::reserve`] makes past the last
/// event.
pub const RESERVE_CHUNK: u64 = 256 * 1024;

/// [`EventLogFile::reserve`] makes room when less than this is left.
const RESERVE_LOW: u64 = 64 * 1024;

/// An append-only RFC 18 eventlog file (see the module documentation).
#[derive(Debug)]
pub struct EventLogFile {
    fs: std::sync::Arc<dyn Fs>,
    path: PathBuf,
    label: String,
    file: Box<dyn FsFile>,
    /// Length of the durable, well-formed content.
    len: u64,
    /// The file's size: `len` and then zero bytes (preallocated room).
    size: u64,
    count: usize,
    /// [`fnv1a`] of the durable content.
    hash: u64,
    staged: String,
    staged_count: usize,
    poisoned: bool,
}

fn label_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

/// One event's line of the log `label`.
pub(crate) fn encode_line(label: &str, e: &Event) -> Result<String, EventLogError> {
    e.encode().map_err(|reason| EventLogError::Encode {
        label: label.to_string(),
        name: e.name.clone(),
        reason,
    })
}

fn encode_all<E: Borrow<Event>>(label: &str, events: &[E]) -> Result<String, EventLogError> {
    let mut buf = String::new();
    for e in events {
        buf.push_str(&encode_line(label, e.borrow())?);
    }
    Ok(buf)
}

impl EventLogFile {
    /// Open (creating if needed) the log at `path` and read it.
    ///
    /// Deletes temporary files of interrupted rewrites, drops a torn tail
    /// (see [`TornTail`]) and fails with `<file name> line N: <reason>` on
    /// any other malformed line.
    pub fn open(fs: std::sync::Arc<dyn Fs>, path: &Path) -> Result<Opened, EventLogError> {
        let path = path.to_path_buf();
        let label = label_of(&path);
        let removed_temp_files = remove_stale_temp_files(&*fs, &path)?;
        let existed = fs.exists(&path).map_err(|e| io_error(&path, "stat", e))?;
        let mut file = fs
            .open_write(&path)
            .map_err(|e| io_error(&path, "open", e))?;
        if !existed {
            file.sync_all().map_err(|e| io_error(&path, "fsync", e))?;
            let dir = parent_of(&path);
            fs.sync_dir(&dir)
                .map_err(|e| io_error(&dir, "fsync directory", e))?;
        }
        let bytes = fs.read(&path).map_err(|e| io_error(&path, "read", e))?;

        let mut events = Vec::new();
        let mut prefix_hashes = vec![FNV_START];
        let mut hash = FNV_START;
        let mut good = 0usize;
        let mut line = 0usize;
        let mut zeroed = false;
        while let Some(nl) = bytes
            .get(good..)
            .and_then(|r| r.iter().position(|&b| b == b'\n'))
        {
            let raw = &bytes[good..good + nl];
            if raw.contains(&0) {
                // An unsynced block: the tail starts here.
                zeroed = true;
                break;
            }
            line += 1;
            let text = std::str::from_utf8(raw).map_err(|_| EventLogError::Corrupt {
                label: label.clone(),
                line,
                reason: EventError::NotUtf8,
            })?;
            let ev = Event::decode(text).map_err(|reason| EventLogError::Corrupt {
                label: label.clone(),
                line,
                reason,
            })?;
            events.push(ev);
            hash = fnv1a(hash, &bytes[good..good + nl + 1]);
            prefix_hashes.push(hash);
            good += nl + 1;
        }

        let mut torn = None;
        let padded = good < bytes.len() && bytes[good..].iter().all(|&b| b == 0);
        if good < bytes.len() && !padded {
            let tail = &bytes[good..];
            let zeroed = zeroed || tail.contains(&0);
            let was_valid_event = !zeroed
                && std::str::from_utf8(tail)
                    .ok()
                    .map(|t| Event::decode(t).is_ok())
                    .unwrap_or(false);
            file.set_len(good as u64)
                .map_err(|e| io_error(&path, "truncate torn last line", e))?;
            file.sync_data()
                .map_err(|e| io_error(&path, "fsync after truncation", e))?;
            torn = Some(TornTail {
                label: label.clone(),
                line: line + 1,
                bytes: tail.len() as u64,
                was_valid_event,
                zeroed,
            });
        }

        let count = events.len();
        Ok(Opened {
            log: EventLogFile {
                fs,
                path,
                label,
                file,
                len: good as u64,
                size: if padded { bytes.len() } else { good } as u64,
                count,
                hash,
                staged: String::new(),
                staged_count: 0,
                poisoned: false,
            },
            events,
            prefix_hashes,
            torn,
            removed_temp_files,
        })
    }

    /// Number of events durably in the file (staged events not included).
    pub fn event_count(&self) -> usize {
        self.count
    }

    /// [`fnv1a`] of the durable content.
    pub fn content_hash(&self) -> u64 {
        self.hash
    }

    /// Queue events for the next commit, without I/O.  Either all of them
    /// are staged or (if one cannot be encoded) none.
    pub fn stage<E: Borrow<Event>>(&mut self, events: &[E]) -> Result<(), EventLogError> {
        let buf = encode_all(&self.label, events)?;
        self.staged.push_str(&buf);
        self.staged_count += events.len();
        Ok(())
    }

    /// Drop staged events that were not committed.
    pub fn discard_staged(&mut self) {
        self.staged.clear();
        self.staged_count = 0;
    }

    /// Write every staged event with one `write` and make them durable with
    /// one `fdatasync` (group commit).  Returns how many events were
    /// committed (0, without any I/O, if none were staged).
    ///
    /// On a failed write the file is truncated back to its last durable
    /// length and the staged events are kept, so the commit can be retried;
    /// if that truncation fails, or the sync itself fails (after which the
    /// kernel may have dropped the data while reporting later syncs as
    /// successful), the log is poisoned and must be reopened.
    pub fn commit(&mut self) -> Result<usize, EventLogError> {
        if self.poisoned {
            return Err(EventLogError::Poisoned {
                label: self.label.clone(),
            });
        }
        if self.staged_count == 0 {
            return Ok(0);
        }
        if let Err(e) = self.file.write_at(self.len, self.staged.as_bytes()) {
            self.rollback();
            return Err(io_error(&self.path, "write", e));
        }
        if let Err(e) = self.file.sync_data() {
            self.poisoned = true;
            return Err(io_error(&self.path, "fdatasync", e));
        }
        self.len += self.staged.len() as u64;
        self.size = self.size.max(self.len);
        self.count += self.staged_count;
        self.hash = fnv1a(self.hash, self.staged.as_bytes());
        let n = self.staged_count;
        self.discard_staged();
        Ok(n)
    }

    /// After a failed write: cut the file back to the durable content
    /// (the preallocated room goes too).
    fn rollback(&mut self) {
        let ok = self.file.set_len(self.len).is_ok() && self.file.sync_data().is_ok();
        if !ok {
            self.poisoned = true;
        }
        self.size = self.len;
    }

    /// Make zeroed room past the last event when less than 64 KiB is
    /// left: [`RESERVE_CHUNK`] bytes of zeros written and synced, so that
    /// the next appends change no file size (see the module
    /// documentation).  Returns whether it wrote.  The events are not
    /// touched: on an error the room is cut back (best effort) and the log
    /// stays usable (appends then grow the file, as without room).
    pub fn reserve(&mut self) -> Result<bool, EventLogError> {
        if self.poisoned || self.size >= self.len + RESERVE_LOW {
            return Ok(false);
        }
        let end = self.len + RESERVE_CHUNK;
        let zeros = vec![0u8; (end - self.size) as usize];
        let r = self
            .file
            .write_at(self.size, &zeros)
            .map_err(|e| io_error(&self.path, "preallocate", e))
            .and_then(|()| {
                self.file
                    .sync_data()
                    .map_err(|e| io_error(&self.path, "fdatasync of preallocated room", e))
            });
        match r {
            Ok(()) => {
                self.size = end;
                Ok(true)
            }
            Err(e) => {
                let _ = self.file.set_len(self.len);
                self.size = self.len;
                Err(e)
            }
        }
    }

    /// Cut the preallocated room: the file ends with its last event (a
    /// clean stop).
    pub fn trim(&mut self) -> Result<(), EventLogError> {
        if self.poisoned || self.size == self.len {
            return Ok(());
        }
        self.file
            .set_len(self.len)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| io_error(&self.path, "truncate preallocated room", e))?;
        self.size = self.len;
        Ok(())
    }

    /// Stage one event and commit (with anything already staged).
    pub fn append(&mut self, event: &Event) -> Result<(), EventLogError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Stage `events` and commit them (with anything already staged): one
    /// write and one fdatasync for the whole batch.
    pub fn append_batch<E: Borrow<Event>>(&mut self, events: &[E]) -> Result<(), EventLogError> {
        if self.poisoned {
            return Err(EventLogError::Poisoned {
                label: self.label.clone(),
            });
        }
        self.stage(events)?;
        self.commit().map(|_| ())
    }

    /// Replace the whole log with `events` (truncation), atomically: the
    /// file holds either the old or the new content after a crash.  Staged
    /// events stay staged and are appended by the next commit.
    pub fn rewrite(&mut self, events: &[Event]) -> Result<(), EventLogError> {
        if self.poisoned {
            return Err(EventLogError::Poisoned {
                label: self.label.clone(),
            });
        }
        let content = encode_all(&self.label, events)?;
        match replace_file(&*self.fs, &self.path, content.as_bytes()) {
            Ok(()) => {}
            Err((Stage::BeforeRename, e)) => return Err(e),
            Err((Stage::AfterRename, e)) => {
                self.poisoned = true;
                return Err(e);
            }
        }
        match self.fs.open_write(&self.path) {
            Ok(f) => self.file = f,
            Err(e) => {
                self.poisoned = true;
                return Err(io_error(&self.path, "reopen after rewrite", e));
            }
        }
        self.len = content.len() as u64;
        self.size = self.len;
        self.count = events.len();
        self.hash = fnv1a(FNV_START, content.as_bytes());
        Ok(())
    }
}

/// Where a whole-file replacement failed.
enum Stage {
    /// The target is untouched.
    BeforeRename,
    /// The new content is in place but may not be durable.
    AfterRename,
}

static TEMP_SEQ: AtomicU64 = AtomicU64::new(0);

fn temp_prefix(path: &Path) -> String {
    format!(".{}.tmp.", label_of(path))
}

fn replace_file(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<(), (Stage, EventLogError)> {
    let dir = parent_of(path);
    let before = |e| (Stage::BeforeRename, e);
    let (tmp, mut file) = loop {
        let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("{}{}.{}", temp_prefix(path), std::process::id(), n));
        match fs.create_new(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(before(io_error(&tmp, "create temporary file", e))),
        }
    };
    let written = file
        .write_all(bytes)
        .map_err(|e| io_error(&tmp, "write", e))
        .and_then(|_| file.sync_all().map_err(|e| io_error(&tmp, "fsync", e)));
    drop(file);
    if let Err(e) = written {
        let _ = fs.remove(&tmp);
        return Err(before(e));
    }
    if let Err(e) = fs.rename(&tmp, path) {
        let _ = fs.remove(&tmp);
        return Err(before(io_error(path, "rename", e)));
    }
    fs.sync_dir(&dir)
        .map_err(|e| (Stage::AfterRename, io_error(&dir, "fsync directory", e)))
}

/// Replace the file at `path` with `bytes` atomically and durably: write a
/// temporary file in the same directory, fsync it, rename it over `path`,
/// fsync the directory.  After a crash `path` holds the old or the new
/// content, never a mix.  Used for `resource.R` and the drain checkpoint.
pub fn write_file_atomic(fs: &dyn Fs, path: &Path, bytes: &[u8]) -> Result<(), EventLogError> {
    replace_file(fs, path, bytes).map_err(|(_, e)| e)
}

/// Delete temporary files left next to `path` by interrupted
/// [`write_file_atomic`] or [`EventLogFile::rewrite`] calls, returning
/// their paths.  Call it at startup, before any writer runs.
pub fn remove_stale_temp_files(fs: &dyn Fs, path: &Path) -> Result<Vec<PathBuf>, EventLogError> {
    let dir = parent_of(path);
    let prefix = temp_prefix(path);
    let names = fs
        .list(&dir)
        .map_err(|e| io_error(&dir, "list directory", e))?;
    let mut removed = Vec::new();
    for name in names {
        if name.starts_with(&prefix) {
            let p = dir.join(&name);
            fs.remove(&p)
                .map_err(|e| io_error(&p, "remove stale temporary file", e))?;
            removed.push(p);
        }
    }
    if !removed.is_empty() {
        fs.sync_dir(&dir)
            .map_err(|e| io_error(&dir, "fsync directory", e))?;
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
#[path = "log_tests.rs"]
mod tests;
