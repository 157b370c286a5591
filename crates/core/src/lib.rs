//! Roster's service core: a pure state machine (requests, liveness changes
//! and the current time in; responses and events out). No sockets, files or
//! clock reads live here, so every behaviour is testable deterministically.
//!
//! This crate is being built up module by module; see ARCHITECTURE.md.

pub mod acquire;
pub mod drain;
pub mod errno;
pub mod journal;
pub mod monitor;
pub mod service;

pub use acquire::{AcquireInfo, GroupError, DEFAULT_GROUP};
pub use service::{Init, Input, Inventory, Level, Method, Output, Service, Settings, StartError};
