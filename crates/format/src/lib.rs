//! flux-core compatible output formatting for Roster.
//!
//! This crate turns the payloads of the resource service into the exact
//! bytes `flux resource` prints (flux-core 0.88), as pure functions: no IO,
//! no clock, no environment reads.  The caller passes the local time zone
//! ([`LocalZone`]), environment lookups and configuration explicitly.
//!
//! * [`OutputFormat`]: flux's output-format engine (a Python `str.format`
//!   implementation with flux's `UtilFormatter` conversions and spec
//!   suffixes, the `?:`/`+:`/`?+:` sentinels, `sort:` prefixes, headers).

mod engine;
mod error;
mod output;
mod pyfmt;
mod pyrepr;
mod time;
mod value;
mod width;

pub use engine::{parse, Chunk, FieldRef};
pub use error::{PyError, PyResult};
pub use output::{headings, Deduplicator, Headings, OutputFormat};
pub use pyrepr::{float_repr, json_dumps, repr_str};
pub use time::{FixedZone, LocalDateTime, LocalZone};
pub use value::{FieldValue, FormatItem};
pub use width::wcswidth;
