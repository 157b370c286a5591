//! What a `flux resource` subcommand run produces.

use pycompat::error::PyError;

/// Log level of a diagnostic (flux's Python logging levels).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// `LOGGER.error`
    Error,
    /// `LOGGER.warning`
    Warning,
    /// `LOGGER.info`
    Info,
}

impl Level {
    /// The level name flux's log format prints (`ERROR`, `WARNING`, `INFO`).
    pub fn name(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warning => "WARNING",
            Level::Info => "INFO",
        }
    }
}

/// One stderr diagnostic; flux prints it as `flux-resource: LEVEL: text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// Level.
    pub level: Level,
    /// Text.
    pub text: String,
}

/// The observable result of a subcommand: stdout bytes, stderr
/// diagnostics (in order, after stdout in flux's case since stdout is
/// block-buffered when not a terminal) and the exit status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CmdOutput {
    /// Everything written to stdout.
    pub stdout: String,
    /// Diagnostics for stderr.
    pub messages: Vec<Message>,
    /// Exit status.
    pub exit_code: i32,
}

impl CmdOutput {
    /// Successful output.
    pub fn ok(stdout: String) -> CmdOutput {
        CmdOutput {
            stdout,
            messages: Vec::new(),
            exit_code: 0,
        }
    }

    /// An uncaught exception: `ERROR: str(exc)`, exit 1, after `stdout`.
    pub fn exception(stdout: String, err: &PyError) -> CmdOutput {
        CmdOutput {
            stdout,
            messages: vec![Message {
                level: Level::Error,
                text: err.to_string(),
            }],
            exit_code: 1,
        }
    }

    /// Render stderr as flux would (`{prog}: {LEVEL}: {text}` per line).
    pub fn stderr_text(&self, prog: &str) -> String {
        self.messages
            .iter()
            .map(|m| format!("{prog}: {}: {}\n", m.level.name(), m.text))
            .collect()
    }
}
