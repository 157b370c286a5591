//! RFC 18 eventlogs, flux-core compatible: the codec only (the crate does
//! no IO; the crash-safe log files are in the `store` crate).
//!
//! * [`Event`]: one event; [`Event::encode`] writes the line flux-core's
//!   `eventlog_entry_encode()` writes (compact JSON, keys `timestamp`,
//!   `name`, `context`, then `\n`, numbers and escapes as jansson formats
//!   them, see [`json`]); [`Event::decode`] accepts what flux-core accepts
//!   and names what is wrong otherwise.
//! * [`decode_log`] / [`encode_log`]: whole logs (`line N: <reason>` errors).
//!
//! The crate does no I/O and never reads the clock: timestamps are
//! always passed in.

mod event;
pub mod json;

pub use event::{decode_log, encode_log, Event, EventError, LogError};

/// Re-exported so callers can build contexts without naming serde_json.
pub use serde_json::{Map, Value};

#[cfg(test)]
mod tests;
