//! Subcommands. Each exposes `main(args) -> ExitCode` where `args[0]` is the program name.

pub mod agent;
pub mod docs;
pub mod graph;
pub mod hostlist;
pub mod idset;
pub mod r;
pub mod resource;
pub mod serve;
pub mod suggest;
