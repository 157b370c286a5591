//! RFC 18 eventlogs, flux-core compatible, and crash-safe persistence for
//! the resource service.
//!
//! * [`Event`]: one event; [`Event::encode`] writes the line flux-core's
//!   `eventlog_entry_encode()` writes (compact JSON, keys `timestamp`,
//!   `name`, `context`, then `\n`, numbers and escapes as jansson formats
//!   them, see [`json`]); [`Event::decode`] accepts what flux-core accepts
//!   and names what is wrong otherwise.
//! * [`decode_log`] / [`encode_log`]: whole logs (`line N: <reason>` errors).
//! * [`EventLogFile`]: an append-only log file with fdatasync before
//!   returning, group commit ([`EventLogFile::stage`] + [`EventLogFile::commit`],
//!   or [`EventLogFile::append_batch`]), recovery of a torn last line, and
//!   atomic [`EventLogFile::rewrite`] for truncation.
//! * [`write_file_atomic`]: temp file + fsync + rename + directory fsync,
//!   for whole files such as `resource.R` and the drain checkpoint.
//!
//! The crate does no async I/O and never reads the clock: timestamps are
//! always passed in.

mod event;
mod file;
pub mod json;

pub use event::{decode_log, encode_log, Event, EventError, LogError};
pub use file::{
    remove_stale_temp_files, write_file_atomic, EventLogError, EventLogFile, Opened, TornTail,
};

/// Re-exported so callers can build contexts without naming serde_json.
pub use serde_json::{Map, Value};

#[cfg(test)]
mod tests;
