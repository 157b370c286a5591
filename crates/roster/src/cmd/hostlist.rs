//! `roster hostlist`: mirrors `flux hostlist`.
use std::ffi::OsString;
use std::process::ExitCode;

pub fn main(_args: Vec<OsString>) -> ExitCode {
    eprintln!("roster hostlist: not implemented yet");
    ExitCode::from(1)
}
