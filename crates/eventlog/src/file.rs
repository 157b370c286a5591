//! Crash-safe files: an append-only eventlog with group commit, and atomic
//! whole-file replacement.
//!
//! Durability rules:
//!
//! * An append (or a [`EventLogFile::commit`] of staged events) returns `Ok`
//!   only after one `write` of all the lines and one `fdatasync`.
//! * A crash can leave at most the last line partly written.  Because every
//!   write ends with `\n`, a log whose last line has no newline was torn:
//!   [`EventLogFile::open`] drops that tail (even if it happens to be valid
//!   JSON — its append never returned `Ok`), truncates the file back to the
//!   last complete line, and reports a [`TornTail`] warning.  Any other
//!   undecodable line is corruption and an error naming the line.
//!   (flux-core's `eventlog_decode()` would instead refuse a log made of a
//!   single unterminated line and silently ignore a tail after a newline.)
//! * Whole-file replacement ([`write_file_atomic`], [`EventLogFile::rewrite`])
//!   writes a temporary file `.<name>.tmp.<pid>.<n>` in the same directory,
//!   fsyncs it, renames it over the target and fsyncs the directory.  A
//!   temporary file left by a crash is never read; [`EventLogFile::open`]
//!   and [`remove_stale_temp_files`] delete them.
//! * One process writes a given file at a time (the caller's job, e.g. a
//!   lock on the state directory).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::event::{Event, EventError};

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
    #[error("{}: {op}: {source}", path.display())]
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

/// A torn last line found and removed by [`EventLogFile::open`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// The log's file name, as used in messages.
    pub label: String,
    /// The (1-based) line number of the dropped text.
    pub line: usize,
    /// How many bytes were dropped.
    pub bytes: u64,
    /// Whether the dropped text was a complete, valid event lacking only its newline.
    pub was_valid_event: bool,
}

impl std::fmt::Display for TornTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
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

/// What [`EventLogFile::open`] found.
#[derive(Debug)]
pub struct Opened {
    /// The log, ready for appends.
    pub log: EventLogFile,
    /// Every event in the log, in file order.
    pub events: Vec<Event>,
    /// Set when a torn last line was discarded (worth a warning in the log).
    pub torn: Option<TornTail>,
    /// Temporary files of interrupted rewrites that were deleted.
    pub removed_temp_files: Vec<PathBuf>,
}

/// Test hook: make the next write or sync fail.
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailPoint {
    /// Write this many bytes, then fail the write.
    Write { after: usize },
    /// Write everything, then fail the fdatasync.
    Sync,
}

/// An append-only RFC 18 eventlog file (see the module documentation).
#[derive(Debug)]
pub struct EventLogFile {
    path: PathBuf,
    label: String,
    file: File,
    /// Length of the durable, well-formed content.
    len: u64,
    count: usize,
    staged: String,
    staged_count: usize,
    poisoned: bool,
    #[cfg(test)]
    fail: Option<FailPoint>,
}

fn label_of(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string())
}

fn dir_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn sync_dir(dir: &Path) -> Result<(), EventLogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, "fsync directory", e))
}

impl EventLogFile {
    /// Open (creating if needed) the log at `path` and read it.
    ///
    /// Deletes temporary files of interrupted rewrites, drops a torn last
    /// line (see [`TornTail`]) and fails with
    /// `<file name> line N: <reason>` on any other malformed line.
    pub fn open(path: impl AsRef<Path>) -> Result<Opened, EventLogError> {
        let path = path.as_ref().to_path_buf();
        let label = label_of(&path);
        let removed_temp_files = remove_stale_temp_files(&path)?;
        let existed = match fs::symlink_metadata(&path) {
            Ok(_) => true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => false,
            Err(e) => return Err(io_error(&path, "stat", e)),
        };
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(|e| io_error(&path, "open", e))?;
        if !existed {
            file.sync_all().map_err(|e| io_error(&path, "fsync", e))?;
            sync_dir(&dir_of(&path))?;
        }
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| io_error(&path, "read", e))?;

        let mut events = Vec::new();
        let mut good = 0usize;
        let mut line = 0usize;
        while let Some(nl) = bytes
            .get(good..)
            .and_then(|r| r.iter().position(|&b| b == b'\n'))
        {
            line += 1;
            let raw = &bytes[good..good + nl];
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
            good += nl + 1;
        }

        let mut torn = None;
        if good < bytes.len() {
            let tail = &bytes[good..];
            let was_valid_event = std::str::from_utf8(tail)
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
            });
        }

        let count = events.len();
        Ok(Opened {
            log: EventLogFile {
                path,
                label,
                file,
                len: good as u64,
                count,
                staged: String::new(),
                staged_count: 0,
                poisoned: false,
                #[cfg(test)]
                fail: None,
            },
            events,
            torn,
            removed_temp_files,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of events durably in the file (staged events not included).
    pub fn event_count(&self) -> usize {
        self.count
    }

    /// Size of the durable content in bytes.
    pub fn byte_len(&self) -> u64 {
        self.len
    }

    /// Number of staged events waiting for [`EventLogFile::commit`].
    pub fn staged(&self) -> usize {
        self.staged_count
    }

    /// Queue events for the next commit, without I/O.  Either all of them
    /// are staged or (if one cannot be encoded) none.
    pub fn stage(&mut self, events: &[Event]) -> Result<(), EventLogError> {
        let mut buf = String::new();
        for e in events {
            let line = e.encode().map_err(|reason| EventLogError::Encode {
                label: self.label.clone(),
                name: e.name.clone(),
                reason,
            })?;
            buf.push_str(&line);
        }
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
        if let Err(e) = self.write_staged() {
            self.rollback();
            return Err(e);
        }
        if let Err(e) = self.sync() {
            self.poisoned = true;
            return Err(e);
        }
        self.len += self.staged.len() as u64;
        self.count += self.staged_count;
        let n = self.staged_count;
        self.discard_staged();
        Ok(n)
    }

    fn write_staged(&mut self) -> Result<(), EventLogError> {
        #[cfg(test)]
        if let Some(FailPoint::Write { after }) = self.fail {
            self.fail = None;
            let part = self.staged.as_bytes().get(..after).unwrap_or(&[]);
            let _ = self.file.write_all(part);
            return Err(io_error(&self.path, "write", io::Error::other("injected")));
        }
        self.file
            .write_all(self.staged.as_bytes())
            .map_err(|e| io_error(&self.path, "write", e))
    }

    fn sync(&mut self) -> Result<(), EventLogError> {
        #[cfg(test)]
        if self.fail == Some(FailPoint::Sync) {
            self.fail = None;
            return Err(io_error(
                &self.path,
                "fdatasync",
                io::Error::other("injected"),
            ));
        }
        self.file
            .sync_data()
            .map_err(|e| io_error(&self.path, "fdatasync", e))
    }

    /// After a failed write: cut the file back to the durable content.
    fn rollback(&mut self) {
        let ok = self.file.set_len(self.len).is_ok() && self.file.sync_data().is_ok();
        if !ok {
            self.poisoned = true;
        }
    }

    /// Stage one event and commit (with anything already staged).
    pub fn append(&mut self, event: &Event) -> Result<(), EventLogError> {
        self.append_batch(std::slice::from_ref(event))
    }

    /// Stage `events` and commit them (with anything already staged): one
    /// write and one fdatasync for the whole batch.
    pub fn append_batch(&mut self, events: &[Event]) -> Result<(), EventLogError> {
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
        let mut content = String::new();
        for e in events {
            let line = e.encode().map_err(|reason| EventLogError::Encode {
                label: self.label.clone(),
                name: e.name.clone(),
                reason,
            })?;
            content.push_str(&line);
        }
        match replace_file(&self.path, content.as_bytes()) {
            Ok(()) => {}
            Err((Stage::BeforeRename, e)) => return Err(e),
            Err((Stage::AfterRename, e)) => {
                self.poisoned = true;
                return Err(e);
            }
        }
        match OpenOptions::new().read(true).append(true).open(&self.path) {
            Ok(f) => self.file = f,
            Err(e) => {
                self.poisoned = true;
                return Err(io_error(&self.path, "reopen after rewrite", e));
            }
        }
        self.len = content.len() as u64;
        self.count = events.len();
        Ok(())
    }

    #[cfg(test)]
    pub(crate) fn fail_next(&mut self, fp: FailPoint) {
        self.fail = Some(fp);
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

fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), (Stage, EventLogError)> {
    let dir = dir_of(path);
    let before = |e| (Stage::BeforeRename, e);
    let (tmp, mut file) = loop {
        let n = TEMP_SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = dir.join(format!("{}{}.{}", temp_prefix(path), std::process::id(), n));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
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
        let _ = fs::remove_file(&tmp);
        return Err(before(e));
    }
    if let Err(e) = fs::rename(&tmp, path) {
        let _ = fs::remove_file(&tmp);
        return Err(before(io_error(path, "rename", e)));
    }
    sync_dir(&dir).map_err(|e| (Stage::AfterRename, e))
}

/// Replace the file at `path` with `bytes` atomically and durably: write a
/// temporary file in the same directory, fsync it, rename it over `path`,
/// fsync the directory.  After a crash `path` holds the old or the new
/// content, never a mix.  Used for `resource.R` and the drain checkpoint.
pub fn write_file_atomic(path: impl AsRef<Path>, bytes: &[u8]) -> Result<(), EventLogError> {
    replace_file(path.as_ref(), bytes).map_err(|(_, e)| e)
}

/// Delete temporary files left next to `path` by interrupted
/// [`write_file_atomic`] or [`EventLogFile::rewrite`] calls, returning
/// their paths.  Call it at startup, before any writer runs.
pub fn remove_stale_temp_files(path: impl AsRef<Path>) -> Result<Vec<PathBuf>, EventLogError> {
    let path = path.as_ref();
    let dir = dir_of(path);
    let prefix = temp_prefix(path);
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) => return Err(io_error(&dir, "list directory", e)),
    };
    let mut removed = Vec::new();
    for ent in rd {
        let ent = ent.map_err(|e| io_error(&dir, "list directory", e))?;
        let name = ent.file_name();
        if name.to_string_lossy().starts_with(&prefix) {
            let p = ent.path();
            fs::remove_file(&p).map_err(|e| io_error(&p, "remove stale temporary file", e))?;
            removed.push(p);
        }
    }
    if !removed.is_empty() {
        sync_dir(&dir)?;
    }
    removed.sort();
    Ok(removed)
}
