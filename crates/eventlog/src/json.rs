//! Compact JSON exactly as flux-core writes it with jansson
//! (`json_dumps (o, JSON_COMPACT)`): the one writer is
//! [`pycompat::jansson`] (which also documents how reals are written),
//! re-exported here for the eventlog codec.

pub use pycompat::jansson::{
    format_real, to_compact_string, write_object, write_string, write_value,
};
