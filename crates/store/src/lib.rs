//! The state directory of `roster serve`: what flux-core keeps in the KVS
//! under `resource.R`, `resource.eventlog` and `checkpoint.resource`.
//!
//! | file | content | written by |
//! |---|---|---|
//! | `resource.eventlog` | RFC 18 eventlog, one event per line | [`StateDir::append`] (group commit), [`StateDir::rewrite_eventlog`] |
//! | `resource.R` | the instance R, JSON text | [`StateDir::write_r`] |
//! | `checkpoint.resource` | drain checkpoint, JSON | [`StateDir::write_checkpoint`] |
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
//! * At open, everything read (log, R, checkpoint, the directory's
//!   entries) is fsynced before the daemon builds on it: after a failed
//!   sync and a restart without power loss, the page cache can hold data
//!   that never reached the disk.
//! * The directory itself, when created, is made durable by fsyncing its
//!   parent.
//! * A zero-filled block in the unsynced tail of the eventlog (its size
//!   reached the disk, its data did not), even when followed by more text
//!   and newlines, is a torn tail too: dropped and reported, not a
//!   refusal to start.
//!
//! # Positions, not clocks
//!
//! [`StateDir::write_checkpoint`] records in the checkpoint where it
//! stands in `resource.eventlog`: the number of events it summarises and a
//! hash of their lines (key [`POSITION_KEY`]).  [`StateDir::open`] finds
//! which recorded position matches the log and returns it as
//! [`Loaded::replay_from`]; replay starts there, whatever the events'
//! timestamps say.  History truncation ([`StateDir::truncate_before_checkpoint`])
//! drops only events before that position, crash-safely (see there).
//!
//! # File system
//!
//! Every file operation goes through the [`Fs`] trait: [`RealFs`] in the
//! daemon, [`sim::SimDisk`] in tests (a page-cache model that loses what
//! was not synced at a simulated power loss, tears writes and injects
//! `ENOSPC`/`EIO`).  The file layer (append-only log, atomic replacement)
//! lives here, not in the `eventlog` crate, which is a pure codec.
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

mod fs;
mod history;
mod log;
pub mod sim;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use eventlog::Event;
use serde_json::Value;

pub use fs::{Fs, FsFile, RealFs};
pub use history::{checkpoint_timestamp, history_cutoff, truncate_history};
pub use log::{
    fnv1a, remove_stale_temp_files, write_file_atomic, EventLogError, EventLogFile, Opened,
    TornTail, FNV_START,
};

/// Name of the eventlog file.
pub const EVENTLOG_FILE: &str = "resource.eventlog";
/// Name of the R file.
pub const R_FILE: &str = "resource.R";
/// Name of the drain checkpoint file.
pub const CHECKPOINT_FILE: &str = "checkpoint.resource";
/// Name of the lock file.
pub const LOCK_FILE: &str = "lock";
/// The checkpoint key holding its position(s) in `resource.eventlog`.
pub const POSITION_KEY: &str = "log_position";

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

pub(crate) use rpc::errno::io_text;

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
    /// The checkpoint's position in `resource.eventlog`: the number of
    /// events it summarises (replay starts at this index).  `None` without
    /// a checkpoint, or when the checkpoint records no position (written
    /// by an older version) or none that matches the log: then the caller
    /// falls back to comparing timestamps, and [`Loaded::warnings`] says so.
    pub replay_from: Option<usize>,
    /// Things repaired while opening, worth logging: a discarded torn last
    /// line, deleted temporary files.
    pub warnings: Vec<String>,
}

/// An open, locked state directory.
#[derive(Debug)]
pub struct StateDir {
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    log: EventLogFile,
    /// The matching checkpoint position found at open: (events, hash).
    position: Option<(usize, u64)>,
    /// Holds the lock; released when dropped.
    _lock: Box<dyn std::fmt::Debug + Send + Sync>,
}

/// Read a whole file, `None` if it does not exist.
fn read_optional(fs: &dyn Fs, path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    match fs.read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StoreError::Io {
            path: path.to_path_buf(),
            op: "read",
            source: e,
        }),
    }
}

/// One recorded position: `{"events": N, "fnv1a": "<16 hex digits>"}`
/// (the hash of the first N lines), plus `"log": "<16 hex digits>"`, the
/// hash of the whole log, in the two positions written while a truncation
/// rewrites the log (no event is appended meanwhile): it tells the old log
/// from the new one even if their first lines happened to be identical.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Position {
    events: usize,
    hash: u64,
    whole: Option<u64>,
}

fn position_value(p: Position) -> Value {
    let mut v = serde_json::json!({"events": p.events, "fnv1a": format!("{:016x}", p.hash)});
    if let Some(w) = p.whole {
        v["log"] = Value::String(format!("{w:016x}"));
    }
    v
}

/// The positions recorded in a checkpoint (none for an older checkpoint).
fn positions_of(checkpoint: &Value) -> Vec<Position> {
    let Some(list) = checkpoint.get(POSITION_KEY).and_then(Value::as_array) else {
        return Vec::new();
    };
    let hex = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .and_then(|s| u64::from_str_radix(s, 16).ok())
    };
    list.iter()
        .filter_map(|p| {
            Some(Position {
                events: usize::try_from(p.get("events")?.as_u64()?).ok()?,
                hash: hex(p.get("fnv1a"))?,
                whole: hex(p.get("log")),
            })
        })
        .collect()
}

/// `checkpoint` with its positions replaced by `positions`.
fn with_positions(checkpoint: &Value, positions: &[Position]) -> Value {
    let mut v = checkpoint.clone();
    if let Some(obj) = v.as_object_mut() {
        let list = positions.iter().map(|&p| position_value(p)).collect();
        obj.insert(POSITION_KEY.to_string(), Value::Array(list));
    }
    v
}

/// The checkpoint's text as written.
fn checkpoint_text(v: &Value) -> String {
    let mut text = v.to_string();
    text.push('\n');
    text
}

impl StateDir {
    /// Open the state directory `dir` on the real file system (see
    /// [`StateDir::open_on`]).
    pub fn open(dir: &Path) -> Result<(StateDir, Loaded), StoreError> {
        StateDir::open_on(Arc::new(RealFs), dir)
    }

    /// Open the state directory `dir` on `fs`, creating it (mode 0700, and
    /// fsyncing its parent so that it survives a power loss) if needed,
    /// lock it, and read its content (see the crate documentation).
    pub fn open_on(fs: Arc<dyn Fs>, dir: &Path) -> Result<(StateDir, Loaded), StoreError> {
        let dir = dir.to_path_buf();
        fs.create_dir_all(&dir)
            .map_err(io_err(&dir, "create state directory"))?;
        let lock = match fs.lock(&dir) {
            Ok(Ok(guard)) => guard,
            Ok(Err(pid)) => return Err(StoreError::Locked { dir, pid }),
            Err(e) => {
                return Err(StoreError::Io {
                    path: dir.join(LOCK_FILE),
                    op: "lock",
                    source: e,
                })
            }
        };

        let mut warnings = Vec::new();
        let opened = EventLogFile::open(Arc::clone(&fs), &dir.join(EVENTLOG_FILE))?;
        if let Some(t) = &opened.torn {
            warnings.push(t.to_string());
        }
        let mut removed = opened.removed_temp_files;
        for name in [R_FILE, CHECKPOINT_FILE] {
            removed.extend(remove_stale_temp_files(&*fs, &dir.join(name))?);
        }
        for p in removed {
            warnings.push(format!(
                "{}: removed a temporary file left by an interrupted write",
                p.display()
            ));
        }

        let r_path = dir.join(R_FILE);
        let r = match read_optional(&*fs, &r_path)? {
            None => None,
            Some(b) => {
                Some(String::from_utf8(b).map_err(|_| StoreError::NotUtf8 { path: r_path })?)
            }
        };
        let ck_path = dir.join(CHECKPOINT_FILE);
        let checkpoint =
            match read_optional(&*fs, &ck_path)? {
                None => None,
                Some(b) => Some(serde_json::from_slice::<Value>(&b).map_err(|e| {
                    StoreError::Checkpoint {
                        path: ck_path,
                        reason: e.to_string(),
                    }
                })?),
            };
        // What was just read becomes the truth the daemon builds on: make
        // it durable first.  After a failed fsync and a restart without a
        // power loss, the page cache may hold a renamed R or log lines that
        // never reached the disk; acknowledging new requests on top of
        // them, then losing them at the next power loss, would lose the
        // state those requests were acknowledged against.
        for (name, present) in [
            (EVENTLOG_FILE, true),
            (R_FILE, r.is_some()),
            (CHECKPOINT_FILE, checkpoint.is_some()),
        ] {
            if present {
                let p = dir.join(name);
                fs.open_write(&p)
                    .and_then(|mut f| f.sync_all())
                    .map_err(io_err(&p, "fsync"))?;
            }
        }
        fs.sync_dir(&dir).map_err(io_err(&dir, "fsync directory"))?;
        // The checkpoint's position: the recorded (count, hash of the
        // first `count` lines) that matches this log.  (Two are recorded
        // while a history truncation rewrites the log: one for the old
        // log, one for the new; whichever file survived a crash matches.)
        let mut position = None;
        let mut checkpoint = checkpoint;
        if let Some(cp) = &mut checkpoint {
            let recorded = positions_of(cp);
            let whole = opened.prefix_hashes.last().copied();
            let found = recorded.iter().copied().find(|p| {
                opened.prefix_hashes.get(p.events) == Some(&p.hash)
                    && p.whole.is_none_or(|w| Some(w) == whole)
            });
            position = found.map(|p| (p.events, p.hash));
            if let (Some(p), true) = (found, recorded.len() > 1) {
                // A truncation was interrupted after the checkpoint named
                // both logs: keep only the one that survived, before
                // anything is appended.
                let single = Position { whole: None, ..p };
                *cp = with_positions(cp, &[single]);
                write_file_atomic(
                    &*fs,
                    &dir.join(CHECKPOINT_FILE),
                    checkpoint_text(cp).as_bytes(),
                )?;
            }
            if position.is_none() {
                warnings.push(if recorded.is_empty() {
                    format!(
                        "{CHECKPOINT_FILE}: no position in {EVENTLOG_FILE} (written by an older version): replaying the events not older than its timestamp"
                    )
                } else {
                    format!(
                        "{CHECKPOINT_FILE}: its position does not match {EVENTLOG_FILE} (edited or damaged?): replaying the events not older than its timestamp"
                    )
                });
            }
        }
        let loaded = Loaded {
            events: opened.events,
            r,
            checkpoint,
            replay_from: position.map(|(n, _)| n),
            warnings,
        };
        Ok((
            StateDir {
                fs,
                dir,
                log: opened.log,
                position,
                _lock: lock,
            },
            loaded,
        ))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Append `events` durably: one `write` of all their lines and one
    /// `fdatasync` (nothing at all for an empty slice).  Returns only once
    /// they are on disk.  On error none of them is in the log (a partly
    /// written batch is cut off), except after a failed `fdatasync`, when
    /// their fate is unknown and every later call fails: reopen.
    pub fn append<E: std::borrow::Borrow<Event>>(
        &mut self,
        events: &[E],
    ) -> Result<(), StoreError> {
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

    /// Make preallocated room at the end of `resource.eventlog` when it
    /// runs low (see [`EventLogFile::reserve`]): between batches, so that
    /// the appends that acknowledge requests each write only their data.
    /// Returns whether it wrote.  An error leaves the log usable.
    pub fn reserve_log(&mut self) -> Result<bool, StoreError> {
        self.log.reserve().map_err(StoreError::from)
    }

    /// Cut the preallocated room of `resource.eventlog` (a clean stop: the
    /// file at rest ends with its last event).
    pub fn trim_log(&mut self) -> Result<(), StoreError> {
        self.log.trim().map_err(StoreError::from)
    }

    /// Replace `resource.eventlog` with `events` atomically (history
    /// truncation at start, for a checkpoint without a position).
    pub fn rewrite_eventlog(&mut self, events: &[Event]) -> Result<(), StoreError> {
        self.log.rewrite(events).map_err(StoreError::from)
    }

    /// History truncation by position: drop the events that come before
    /// the checkpoint's position (see [`Loaded::replay_from`]) and that
    /// `drop` selects (e.g. older than the `history` cutoff); never an
    /// event at or after the position.  `events` is the whole log as
    /// loaded, `checkpoint` the loaded checkpoint.
    ///
    /// Crash-safe although two files change: the checkpoint is first
    /// rewritten recording both positions (old log, new log), then the log
    /// is replaced, then the checkpoint records only the new position.
    /// After a crash at any point, whichever log survived matches one of
    /// the recorded positions.
    ///
    /// Returns the kept events and the new replay position; unchanged
    /// (and nothing written) when nothing is selected or there is no
    /// matching position.
    pub fn truncate_before_checkpoint(
        &mut self,
        events: Vec<Event>,
        checkpoint: &Value,
        drop: impl Fn(&Event) -> bool,
    ) -> Result<(Vec<Event>, Option<usize>), StoreError> {
        let Some((at, hash)) = self.position else {
            return Ok((events, None));
        };
        if at > events.len() || !events[..at].iter().any(&drop) {
            return Ok((events, Some(at)));
        }
        let mut kept = Vec::with_capacity(events.len());
        let mut new_hash = FNV_START;
        let mut new_at = 0usize;
        for (i, ev) in events.into_iter().enumerate() {
            if i < at {
                if drop(&ev) {
                    continue;
                }
                let line = log::encode_line(EVENTLOG_FILE, &ev)?;
                new_hash = fnv1a(new_hash, line.as_bytes());
                new_at += 1;
            }
            kept.push(ev);
        }
        let new_whole = {
            let mut h = new_hash;
            for ev in &kept[new_at..] {
                let line = log::encode_line(EVENTLOG_FILE, ev)?;
                h = fnv1a(h, line.as_bytes());
            }
            h
        };
        let old = Position {
            events: at,
            hash,
            whole: Some(self.log.content_hash()),
        };
        let new = Position {
            events: new_at,
            hash: new_hash,
            whole: Some(new_whole),
        };
        self.write_checkpoint_raw(&with_positions(checkpoint, &[old, new]))?;
        self.log.rewrite(&kept)?;
        self.position = Some((new_at, new_hash));
        let single = Position { whole: None, ..new };
        self.write_checkpoint_raw(&with_positions(checkpoint, &[single]))?;
        Ok((kept, Some(new_at)))
    }

    /// Replace `resource.R` atomically and durably.
    pub fn write_r(&mut self, r_json: &str) -> Result<(), StoreError> {
        write_file_atomic(&*self.fs, &self.dir.join(R_FILE), r_json.as_bytes())?;
        Ok(())
    }

    /// Replace `checkpoint.resource` atomically and durably (compact JSON
    /// and a newline), recording the current end of `resource.eventlog`
    /// as its position (key [`POSITION_KEY`]): the checkpoint summarises
    /// every event durably in the log when it is written.
    pub fn write_checkpoint(&mut self, v: &Value) -> Result<(), StoreError> {
        let at = self.log.event_count();
        let hash = self.log.content_hash();
        let p = Position {
            events: at,
            hash,
            whole: None,
        };
        self.write_checkpoint_raw(&with_positions(v, &[p]))?;
        self.position = Some((at, hash));
        Ok(())
    }

    fn write_checkpoint_raw(&mut self, v: &Value) -> Result<(), StoreError> {
        let text = checkpoint_text(v);
        write_file_atomic(&*self.fs, &self.dir.join(CHECKPOINT_FILE), text.as_bytes())?;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
