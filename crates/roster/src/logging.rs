//! The one logger of `roster serve` and `roster agent`: `tracing` events
//! with their fields, timestamps, `RUST_LOG` filtering (default `info`, or
//! `debug` with `-v`), as text or as JSON lines (`--log-format json`).

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// `--log-format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// `TIMESTAMP LEVEL message key=value...`
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields`, ...).
    Json,
}

/// Install the logger on stderr.  `RUST_LOG` (e.g. `info,serve=debug`)
/// overrides the default level; an unparsable `RUST_LOG` is reported and
/// the default used.
pub fn init(verbose: bool, format: LogFormat) {
    let default = if verbose { "debug" } else { "info" };
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("RUST_LOG={v}: {e}; using {default}");
            EnvFilter::new(default)
        }),
        _ => EnvFilter::new(default),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(false);
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}
