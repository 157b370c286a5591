//! The `flux resource` views: status, the drain listing, list/info/R and
//! eventlog lines, with flux's output-format engine.  The CPython
//! behaviour underneath (`str.format` parsing and specs, `repr`,
//! `json.dumps`, `fromtimestamp`/`strftime`, `wcwidth`) is
//! [`pycompat`]'s.
//!
//! This crate turns the payloads of the resource service into the exact
//! bytes `flux resource` prints (flux-core 0.88), as pure functions: no IO,
//! no clock, no environment reads.  The caller passes the local time zone
//! ([`LocalZone`]), environment lookups ([`Env`]), configuration files
//! (already decoded, [`FormatConfig::merge_file`]) and whether color is on.
//!
//! # Layers
//!
//! * [`OutputFormat`]: flux's output-format engine.  Formats are Python
//!   `str.format` strings ([`parse`] is CPython's parser, field specs
//!   follow CPython's mini-language and error texts, both from
//!   [`pycompat`]) extended by
//!   flux's `UtilFormatter`: conversions `!d` (local datetime, spec
//!   `STRFTIME::SPEC`), `!D`, `!F`, `!H`, `!P`; spec suffixes `+`
//!   (truncation marker), `h` (dash when empty) and `W` (display width);
//!   the column sentinels `?:` (drop if empty everywhere), `+:` (widen to
//!   the widest value) and `?+:`; a `sort:KEY,-KEY` prefix; headers derived
//!   from a field → heading table ([`Headings`]); and the [`Deduplicator`].
//! * Views, each in two phases so that errors appear in flux's order
//!   (option errors before the RPCs, payload errors after):
//!   * [`status_prepare`] / [`drain_list_prepare`] → [`StatusPlan::render`]
//!     for `flux resource status` and the `flux resource drain` listing;
//!   * [`list_prepare`] → [`ListPlan::render`] for `list`, `info` and `R`;
//!   * [`EventLogFormatter`] for `flux resource eventlog` lines.
//! * Every view returns a [`CmdOutput`]: stdout text, stderr diagnostics
//!   (printed by the CLI as `flux-resource: LEVEL: text`) and the exit code.
//!
//! # Fidelity notes
//!
//! * When color is off, flux removes the `{color_up}`/`{color_off}` fields
//!   with `OutputFormat.copy(except_fields=...)`, which also drops the
//!   whitespace-only text in front of each removed field.  The default
//!   status format therefore prints `       STATEUP NNODES NODELIST` and
//!   `       avail ✔      2 ...` when stdout is not a terminal.
//! * Literal `{{`/`}}` do not survive flux's rebuild of the format string
//!   and end in a parse error, as in flux.
//! * `-o rlist` prints a stray `+` (its `?:+` is not a sentinel).
//! * Python's set iteration order (which flux uses for property
//!   combinations and `-q` queues) is not reproducible; this crate uses the
//!   order of the properties object and of the `-q` arguments.

mod cmd;
mod config;
mod engine;
mod eventlog;
mod list;
mod output;
#[cfg(test)]
mod proptests;
mod status;
mod value;

pub use cmd::{CmdOutput, Level, Message};
pub use config::{
    no_env, Env, FormatChoice, FormatConfig, Subcommand, DRAIN_DEFAULT, DRAIN_LONG, INFO_FORMAT,
    LIST_DEFAULT, LIST_RLIST, STATUS_DEFAULT, STATUS_LONG,
};
pub use engine::{parse, Chunk, FieldRef};
pub use eventlog::{EventFormat, EventLogFormatter, TimeFormat};
pub use list::{
    list_headings, list_prepare, queues_of, ListCell, ListCells, ListInput, ListLine, ListOptions,
    ListPlan, ListView, LIST_JSON_VERSION, LIST_VALID_STATES,
};
pub use output::{headings, Deduplicator, Headings, OutputFormat};
pub use pycompat::wcswidth;
pub use pycompat::{float_repr, json_dumps, repr_str};
pub use pycompat::{FixedZone, LocalDateTime, LocalZone};
pub use pycompat::{PyError, PyResult};
pub use status::{
    allocated_ranks, drain_list_prepare, housekeeping_ranks, status_headings, status_prepare,
    StatusInput, StatusLine, StatusOptions, StatusPlan, StatusSets, STATUS_DEFAULT_STATES,
    STATUS_JSON_VERSION, STATUS_VALID_STATES,
};
pub use value::{FieldValue, FormatItem};
