//! Roster's service core: a pure state machine (requests, liveness changes
//! and the current time in; responses and events out). No sockets, files or
//! clock reads live here, so every behaviour is testable deterministically.
//!
//! * [`service`]: the [`Service`] state machine, one module per concern
//!   (load/replay, the topic table, status, drain, journal, reload,
//!   acquire, liveness, agents); its module docs hold the durability
//!   contract and the layout.
//! * [`drain`]: the drain table and flux-core's drain modes.
//! * [`journal`]: the in-memory RFC 44 journal with its `truncate` summary.
//! * [`acquire`]: RFC 28 acquisition (both variants) and resource groups.
//! * [`monitor`]: agents, rank ownership and heartbeat timers.
//! * [`relays`]: relay sessions (agents speaking for a subtree), as idsets.
//! * [`errno`]: the errno values and [`rpc::RpcError`].
//!
//! See ARCHITECTURE.md for where the core sits among the crates.

pub mod acquire;
pub mod drain;
pub mod errno;
pub mod journal;
pub mod monitor;
pub mod relays;
pub mod service;

pub use acquire::{AcquireInfo, GroupError, DEFAULT_GROUP};
pub use service::{
    Init, Input, Inventory, Level, Method, Now, Output, Service, Settings, StartError, Topic,
    TOPICS,
};
