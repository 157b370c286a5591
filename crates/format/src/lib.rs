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

mod cmd;
mod config;
mod engine;
mod error;
mod eventlog;
mod list;
mod output;
#[cfg(test)]
mod proptests;
mod pyfmt;
mod pyrepr;
mod status;
mod time;
mod value;
mod width;

pub use cmd::{CmdOutput, Level, Message};
pub use config::{
    no_env, Env, FormatChoice, FormatConfig, Subcommand, DRAIN_DEFAULT, DRAIN_LONG, INFO_FORMAT,
    LIST_DEFAULT, LIST_RLIST, STATUS_DEFAULT, STATUS_LONG,
};
pub use engine::{parse, Chunk, FieldRef};
pub use error::{PyError, PyResult};
pub use eventlog::{EventFormat, EventLogFormatter, TimeFormat};
pub use list::{
    list_headings, list_prepare, ListInput, ListLine, ListOptions, ListPlan, ListView,
    LIST_VALID_STATES,
};
pub use output::{headings, Deduplicator, Headings, OutputFormat};
pub use pyrepr::{float_repr, json_dumps, repr_str};
pub use status::{
    allocated_ranks, drain_list_prepare, housekeeping_ranks, status_headings, status_prepare,
    StatusInput, StatusLine, StatusOptions, StatusPlan, STATUS_DEFAULT_STATES, STATUS_VALID_STATES,
};
pub use time::{FixedZone, LocalDateTime, LocalZone};
pub use value::{FieldValue, FormatItem};
pub use width::wcswidth;
