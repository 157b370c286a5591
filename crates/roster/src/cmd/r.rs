//! `roster R`: mirrors `flux R`.
use std::ffi::OsString;
use std::process::ExitCode;

pub fn main(_args: Vec<OsString>) -> ExitCode {
    eprintln!("roster R: not implemented yet");
    ExitCode::from(1)
}
