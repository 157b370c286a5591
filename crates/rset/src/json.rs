//! JSON as flux-core's jansson reads and writes it (`json_loads`,
//! `json_loadf`, `json_dumps`): the one implementation is
//! [`pycompat::jansson`], re-exported here for the R codec.

pub use pycompat::jansson::*;
