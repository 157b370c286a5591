//! One home for Roster's emulations of other programs' observable
//! behaviour: CPython (what flux-core's Python commands print), jansson
//! (how flux-core's C code writes JSON) and flux's liboptparse / glibc
//! `getopt_long` (how flux-core's C commands parse options).
//!
//! Everything here is a pure function of its inputs: no IO, no clock, no
//! environment reads.  Callers pass the terminal width, the local time zone
//! and so on.
//!
//! # The CPython version
//!
//! Texts follow **CPython 3.11** (the version `tests/gen_goldens.py` runs
//! with to produce `tests/goldens/`, which `tests/goldens.rs` compares
//! against): `argparse` usage, help and error texts, `textwrap`, `repr()`,
//! float `repr()`, `json.dumps`, the `str.format` mini-language (whose
//! texts are those of 3.10 and later) and `time.strftime` in the C locale.
//!
//! Where CPython 3.11's `argparse` *fails* a valid command line, the
//! emulation keeps the working behaviour of later versions instead, and
//! says so (see [`argparse`]): `--delimiter=--` stores `--` (3.11 drops the
//! `--` and stores an empty list); `-e=S` and `-e-S` on a flag are
//! `ignored explicit argument` errors rather than clusters.
//!
//! # Modules
//!
//! * [`argparse`] — `ArgumentParser` with sub-parsers, mutually exclusive
//!   groups, typed values, flux's help formatter; [`textwrap`] for its help
//!   text.
//! * [`repr`] — `repr(str)`, `ascii(str)`, `repr(float)`, `json.dumps`,
//!   `repr()` of decoded JSON.
//! * [`pyfmt`] — `format(value, spec)` for `str`, `int` and `float`;
//!   [`strformat`] — parsing `str.format` strings.
//! * [`time`] — `datetime.fromtimestamp`, `strftime`.
//! * [`width`] — `wcwidth.wcswidth`.
//! * [`getopt`] — flux's liboptparse (GNU `getopt_long` semantics) with its
//!   usage text, as `flux R` uses it.
//! * [`jansson`] — `json_dumps` as flux-core's C code writes JSON.
//! * [`error`] — Python exceptions ([`PyError`]).

pub mod argparse;
pub mod error;
pub mod getopt;
pub mod jansson;
pub mod pyfmt;
pub mod repr;
pub mod strformat;
pub mod textwrap;
pub mod time;
pub mod width;

#[cfg(test)]
mod proptests;

pub use error::{PyError, PyResult};
pub use repr::{ascii_str, float_repr, json_dumps, py_repr_json, repr_str};
pub use time::{FixedZone, LocalDateTime, LocalZone};
pub use width::wcswidth;
